"""One training step of E2ELR and the proposed method on the economic dispatch, as the runs take it (issue 42).

Why: at case6470 an epoch of the proposed method took about a minute, and profiling put three quarters of it in
the thermal limits' rows (the layer's ``H y`` and ``h(x)``, and the thermal slack, twice); this times the step those
changes are meant to shorten, per method, in one process. A step is what the trainer does per batch: draw a batch by
PGLearn's recipe, the method's forward pass and loss, the backward pass and an Adam step. Each method is set up from
its run configuration (``conf/problem_method/ed_<method>.yaml``: network, batch 32, dtype, method options) with the
decision rule from the cache the runs filled; the weights are freshly initialised (neither method's step does work
that depends on them, beyond which rows the blend picks). ``--warmup`` steps, then ``--steps`` timed one by one:
median and interquartile range.

    python benchmarks/bench_ed_training.py --cases pglib_opf_case1888_rte --out results/bench/ed_training.json

Options the proposed method's runs added on the command line go in ``--proposed-variants``, as in
``bench_ed_inference.py`` (e.g. ``'problem.form=inequality ++problem.input_set=recipe_total
method.rule_solver=rank_one'`` for case6470); problem options for every method in ``--problem-overrides``.
"""

from __future__ import annotations

from hardlinear.runtime.threads import size_native_pools

# one thread in numpy's pools too, before numpy loads: the problem is then built to the same bits as the runs built
# it (threads=1), so their decision rules load from the cache instead of being solved again
size_native_pools(1)

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

METHODS = ("e2elr", "proposed")


def time_steps(case: str, method: str, args: argparse.Namespace, overrides: tuple[str, ...] = ()) -> dict:
    """The row of one (case, method, overrides): step times, or why the method could not be set up."""
    cfg, problem, dtype, m, failure = common.setup_ed_method(case, method, [*args.problem_overrides, *overrides], args.cache_dir)
    row = {"case": str(getattr(problem, "case", case)).replace("pglib_opf_", ""), "method": method, "overrides": " ".join(overrides),
           "k": problem.k, "n": problem.n, "m_ineq": problem.sizes()["m_ineq"], "batch_size": int(cfg.trainer.batch_size)}
    if m is None:
        return {**row, "status": "failed", "note": failure}
    m.train()
    optimizer = torch.optim.Adam(m.parameters(), lr=float(cfg.trainer.lr))
    gen = torch.Generator().manual_seed(1)
    times = []
    for step in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        xi = problem.sample(row["batch_size"], generator=gen).to(dtype)
        loss = m.loss(xi, m(xi))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step >= args.warmup:
            times.append(1e3 * (time.perf_counter() - t0))
    q = statistics.quantiles(times, n=4)
    return {**row, "status": "ok", "step_ms": statistics.median(times), "step_iqr_ms": q[2] - q[0],
            "step_min_ms": min(times), "steps": len(times)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", nargs="+", required=True)
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--cache-dir", default=str(common.DEFAULT_CACHE))
    p.add_argument("--problem-overrides", nargs="*", default=[], metavar="OVERRIDE",
                   help="Hydra overrides for every method, e.g. problem.form=inequality")
    p.add_argument("--proposed-variants", nargs="+", default=[""], metavar="OVERRIDES",
                   help="the proposed method's variants, each a space-separated list of Hydra overrides")
    p.add_argument("--out", default="results/bench/ed_training.json")
    args = p.parse_args(argv)
    if args.steps < 2 or args.warmup < 0:
        p.error(f"--steps must be >= 2 (a spread needs two) and --warmup >= 0; got {args.steps} and {args.warmup}")
    torch.set_num_threads(1)
    env = common.environment("cpu", 1)
    rows = common.ed_rows(args, time_steps, lambda r: f"step {r['step_ms']:.1f} ms (IQR {r['step_iqr_ms']:.1f})", "ed training")
    common.write_rows(args.out, env, vars(args), rows, "ed training")


if __name__ == "__main__":
    main()
