"""Why the end-to-end projection layer barely learns on dcopf_14 (docs/peer_methods.md): its gradient at
initialisation, how far a large change of the network moves the projected outputs, and how far 15 Adam steps
at the paper's learning rate move them.

    python probes/projection_layer_probe.py                       # dcopf_14, lr 1e-4
    python probes/projection_layer_probe.py --problem portfolio

Prints three lines. A few seconds on dcopf_14 (a QP solve per instance); nothing is written.
"""

import argparse
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from hardlinear.harness.preflight import setup_method
from hardlinear.harness.runner import problem_from_config
from hardlinear.methods.base import Context

CONF = str(Path(__file__).resolve().parents[1] / "conf")


def fresh(cfg, problem, ctx):
    torch.manual_seed(0)
    method = instantiate(cfg.method, _convert_="all")
    setup_method(method, problem, ctx)
    return method


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", default="dcopf_14")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--cache-dir", default="data/cache")
    args = parser.parse_args()
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"problem={args.problem}", "method=projection_layer"])
    torch.set_num_threads(1)
    problem = problem_from_config(cfg)
    ctx = Context(cache_dir=args.cache_dir, seed=0, progress=False, network=dict(cfg.network))

    method = fresh(cfg, problem, ctx)
    xi = problem.sample(32, generator=ctx.generator(offset=17)).to(torch.float32)
    method.train()
    y = method(xi)
    loss = method.loss(xi, y)
    loss.backward()
    grad = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in method.parameters() if p.grad is not None))
    print(f"{args.problem}: loss {loss.item():.6g} on 32 inputs; gradient norm w.r.t. the network {grad.item():.3e}")
    with torch.no_grad():
        for p in method.parameters():
            p.add_(0.5 * torch.randn_like(p))
        moved = (method(xi) - y).abs().max().item()
    print(f"network weights perturbed by 0.5 N(0,1): projected outputs move by up to {moved:.3e} (max |y| {y.abs().max().item():.3e})")

    method = fresh(cfg, problem, ctx)
    opt = torch.optim.Adam(method.parameters(), lr=args.lr)
    xv = problem.sample(16, generator=ctx.generator(offset=99)).to(torch.float32)

    def validation() -> tuple[float, torch.Tensor]:
        method.eval()
        with torch.no_grad():
            out = method(xv)
            return method.loss(xv, out).item(), out.double()

    before, out0 = validation()
    for step in range(15):
        method.train()
        x = problem.sample(32, generator=ctx.generator(offset=200 + step)).to(torch.float32)
        step_loss = method.loss(x, method(x))
        opt.zero_grad()
        step_loss.backward()
        opt.step()
    after, out1 = validation()
    print(f"15 Adam steps (lr {args.lr:g}): loss on 16 held-out inputs {before:.8g} -> {after:.8g}; "
          f"projected outputs move by up to {(out1 - out0).abs().max().item():.3e}")


if __name__ == "__main__":
    main()
