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

from hardlinear.threads import size_native_pools

# one thread in numpy's pools too, before numpy loads: the problem is then built to the same bits as the runs built
# it (threads=1), so their decision rules load from the cache instead of being solved again
size_native_pools(1)

import argparse  # noqa: E402
import json  # noqa: E402
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
    from hydra.utils import instantiate

    from hardlinear.harness.runner import problem_from_config
    from hardlinear.methods.base import Context

    cfg = common.compose("ed", method, [f"problem.case={case}", *args.problem_overrides, *overrides])
    problem = problem_from_config(cfg)
    dtype = {"float32": torch.float32, "float64": torch.float64}[str(cfg.dtype)]
    ctx = Context(cache_dir=str(args.cache_dir), device="cpu", dtype=dtype, seed=0, progress=False,
                  network=dict(cfg.network))
    row = {"case": str(getattr(problem, "case", case)).replace("pglib_opf_", ""), "method": method, "overrides": " ".join(overrides),
           "k": problem.k, "n": problem.n, "m_ineq": problem.sizes()["m_ineq"], "batch_size": int(cfg.trainer.batch_size)}
    m = instantiate(cfg.method, _convert_="all")
    try:
        m.setup(problem, ctx)
    except Exception as err:  # noqa: BLE001 - reported as the row's status, never skipped silently
        return {**row, "status": "failed", "note": f"{type(err).__name__}: {str(err)[:200]}"}
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
    rows = []
    for case in args.cases:
        runs = [(m, ()) for m in args.methods if m != "proposed"]
        if "proposed" in args.methods:
            runs += [("proposed", tuple(v.split())) for v in args.proposed_variants]
        for method, overrides in runs:
            row = time_steps(case, method, args, overrides)
            common.log(f"[ed training] {row['case']} {method} {row['overrides']}: " + (
                f"step {row['step_ms']:.1f} ms (IQR {row['step_iqr_ms']:.1f})" if row["status"] == "ok"
                else f"{row['status']}: {row['note']}"))
            rows.append(row)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"environment": env, "settings": vars(args), "rows": rows}, indent=1, default=str) + "\n")
    common.log(f"[ed training] wrote {out}")


if __name__ == "__main__":
    main()
