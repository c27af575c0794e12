"""The fused layer's compiled block path (``batch_mode=compile``) against its default block path, on trained runs.

Why: torch.compile (inductor) may reorder or fuse the elementwise passes of the blend; the guarantee is that of the
eager arithmetic. Per finished ``proposed`` run (``RUN_DIR``: ``run.py ... method=proposed``), on ``--batch``
inputs of the box (float32, as the harness hands them over), in chunks of the module's own size: the largest
relative output difference per row (``max |a - b| / (1 + max |b|)``), the largest alpha difference, whether alpha
= 0 falls on the same rows and those rows are bit for bit equal, how many rows differ in any bit, the worst slack
of the compiled output in the layer's own float64 evaluation (must be >= 0 exactly) and its equality residual,
and the compile time (first call minus a warm call). Not a timing of the path: ``bench_methods.py
--batch-modes compile`` times it.

Run: ``python benchmarks/investigations/fused_compile_exactness.py RUN_DIR [RUN_DIR ...] --batch 4096`` (``fresh:PROBLEM`` instead of
a run: a freshly initialised network); prints one JSON line per run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common


def load(source: str, cache_dir: str | None):
    """A set-up ``proposed`` in eval mode: a finished run's (``RUN_DIR``), or freshly initialised (``fresh:PROBLEM``:
    ``conf/method/proposed`` on ``conf/problem/PROBLEM``, as bench_methods builds it, seed 0)."""
    if source.startswith("fresh:"):
        import argparse

        import common

        problem_cfg = source.removeprefix("fresh:")
        args = argparse.Namespace(cache_dir=cache_dir or "data/cache", device="cpu", seed=0)
        torch.manual_seed(0)
        method = common.make_method(problem_cfg, "proposed", common.load_problem(problem_cfg), common.make_context(args))[0]
    else:
        from hardlinear.harness.checkpoint import load_run

        method = load_run(source, cache_dir=cache_dir)
    method.eval()
    return method


def compare(run_dir: str, batch: int, seed: int, cache_dir: str | None) -> dict:
    from hardlinear.layers.fused import FusedProposed

    method = load(run_dir, cache_dir)
    problem = method.problem
    xi = problem.sample(batch, generator=torch.Generator().manual_seed(seed)).to(torch.float32)
    build = lambda mode: FusedProposed(  # noqa: E731
        problem.family, method.net, method.layer, method.layer_dtype, batch_mode=mode
    )
    off, comp = build("off"), build("compile")
    with torch.no_grad():
        y0 = off(xi)
        a0 = off.last_stats["alpha"]
        t0 = time.perf_counter()
        y1 = comp(xi)
        first = time.perf_counter() - t0
        a1 = comp.last_stats["alpha"]
        t0 = time.perf_counter()
        comp(xi)
        warm = time.perf_counter() - t0
    rel = (y1 - y0).abs().amax(dim=1) / (1.0 + y0.abs().amax(dim=1))
    stay = a0 == 0
    xd = xi.double()
    slack = method.layer.slacks.slack(xd, y1, method.layer.slacks.rhs(xd, y1))
    scale = 1.0 + y1.abs().amax(dim=1)
    return {
        "run": run_dir, "problem": problem.name, "batch": batch, "chunk_rows": comp.chunk_rows,
        "batch_mode": comp.batch_mode, "rows_alpha0": int(stay.sum()), "rows_moved": int((~stay).sum()),
        "max_rel_diff": float(rel.max()), "max_alpha_diff": float((a1 - a0).abs().max()),
        "alpha0_same_rows": bool(torch.equal(a1 == 0, stay)), "alpha0_rows_bit_identical": bool(torch.equal(y1[stay], y0[stay])),
        "rows_differing_in_any_bit": int((y1 != y0).any(dim=1).sum()),
        "worst_slack": float(slack.amin()), "worst_ineq_resid": float(problem.ineq_resid(xd, y1).amax()),
        "worst_eq_resid_rel": float((problem.eq_resid(xd, y1).abs().amax(dim=1) / scale).max()),
        "compile_s": first - warm,
    }  # fmt: skip


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dirs", nargs="+", help="finished proposed runs (run.py ... method=proposed), or fresh:PROBLEM "
                   "for a freshly initialised network")
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--cache-dir", default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    for run_dir in args.run_dirs:
        print(json.dumps(compare(run_dir, args.batch, args.seed, args.cache_dir)), flush=True)


if __name__ == "__main__":
    main()
