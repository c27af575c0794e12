"""The dispatch's reference solves: lazy line rows (the default) against the whole LP (``data.lazy_rows=false``).

For each case, a few test instances drawn as the harness draws its test set (PGLearn's recipe, ``data.test_seed``),
each solved both ways, alternately (so that a change in the machine's load falls on both): the whole LP by the
``highs`` backend as ``data/ref_solve_ms`` times it (HiGHS's ``run`` alone; the model is built once per case and not
timed), the lazy rows by :class:`~hardlinear.problems.ed_reference.LazyDispatchSolver` (its whole call: load flows,
every round's solve, flows and rows). Reported: the median time each way, the ratio of the medians and the spread
of the per-instance ratios, the largest relative objective difference, the rounds and line rows the lazy solves
took, and the load average before and after (``/proc/loadavg``). The problem's build (its dense PTDF, cached under
``--cache-dir``) is timed apart and is not in either figure. Example::

    python benchmarks/bench_ed_reference.py --cases pglib_opf_case6470_rte pglib_opf_case9241_pegase --instances 3

The JSON (``--out``) holds one row per instance and one summary per case; the markdown table goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages (``/proc/loadavg``), or n/a where there is none."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def bench_case(case: str, instances: int, seed: int, cache_dir: str | None) -> tuple[dict, list[dict]]:
    from hardlinear.problems.datasets import SPLIT_OFFSETS
    from hardlinear.problems.ed import EconomicDispatch
    from hardlinear.solvers import FamilySolver, make_solver

    start = time.perf_counter()
    problem = EconomicDispatch(case, cache_dir=cache_dir)
    build_s = time.perf_counter() - start
    xi = problem.sample(instances, generator=torch.Generator().manual_seed(seed + SPLIT_OFFSETS["test"])).numpy()
    start = time.perf_counter()
    full = FamilySolver(problem, "highs", {}, make_solver(problem, "highs"))
    model_s = time.perf_counter() - start
    lazy = problem.lazy_reference()
    load_before = loadavg()
    rows = []
    for i in range(instances):
        a = full.solve(xi[i])
        b = lazy.solve(xi[i])
        if a.status != "optimal" or b.status != "optimal":
            raise RuntimeError(f"{case} instance {i}: full {a.status!r}, lazy {b.status!r}")
        rows.append({"case": case, "instance": i, "full_ms": 1e3 * a.time_s, "lazy_ms": 1e3 * b.time_s,
                     "ratio": a.time_s / b.time_s, "rel_objective_diff": abs(a.objective - b.objective) / abs(a.objective),
                     "rounds": b.rounds, "rows_added": b.rows_added, "full_objective": a.objective})
        print(f"  {case} #{i}: full {rows[-1]['full_ms']:.0f} ms, lazy {rows[-1]['lazy_ms']:.0f} ms "
              f"({b.rounds} rounds, {b.rows_added} rows), rel. diff {rows[-1]['rel_objective_diff']:.1e}", file=sys.stderr, flush=True)
    ratios = [r["ratio"] for r in rows]
    full_ms, lazy_ms = [r["full_ms"] for r in rows], [r["lazy_ms"] for r in rows]
    summary = {
        "case": case, "instances": instances, "lines_limited": len(problem.limited), "generators": len(problem.network.gen_bus),
        "full_ms_median": statistics.median(full_ms), "lazy_ms_median": statistics.median(lazy_ms),
        "ratio_of_medians": statistics.median(full_ms) / statistics.median(lazy_ms),
        "ratio_min": min(ratios), "ratio_max": max(ratios),
        "max_rel_objective_diff": max(r["rel_objective_diff"] for r in rows),
        "rounds_max": max(r["rounds"] for r in rows), "rows_added_max": max(r["rows_added"] for r in rows),
        "problem_build_s": build_s, "full_model_build_s": model_s, "loadavg_before": load_before, "loadavg_after": loadavg(),
    }
    return summary, rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--cases", nargs="+", default=["pglib_opf_case1354_pegase", "pglib_opf_case2869_pegase"])
    p.add_argument("--instances", type=int, default=3, help="test instances per case")
    p.add_argument("--seed", type=int, default=12345, help="data.test_seed (the test set's draws)")
    p.add_argument("--cache-dir", default=str(REPO / "data" / "cache"), help="where the dense PTDF is cached")
    p.add_argument("--out", default=None, help="JSON file for the rows and summaries")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    summaries, rows = [], []
    for case in args.cases:
        s, r = bench_case(case, args.instances, args.seed, args.cache_dir)
        summaries.append(s)
        rows += r
        print(json.dumps(s), file=sys.stderr, flush=True)
    print("| case | whole LP (median ms) | lazy rows (median ms) | ratio of medians (per-instance min-max) | max rel. objective diff | rounds / rows (max) | load before / after |")
    print("|---|---|---|---|---|---|---|")
    for s in summaries:
        print(f"| {s['case'].replace('pglib_opf_', '')} | {s['full_ms_median']:,.0f} | {s['lazy_ms_median']:,.1f} | "
              f"{s['ratio_of_medians']:.0f}x ({s['ratio_min']:.0f}-{s['ratio_max']:.0f}) | {s['max_rel_objective_diff']:.1e} | "
              f"{s['rounds_max']} / {s['rows_added_max']} | {s['loadavg_before']} / {s['loadavg_after']} |")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        meta = {"argv": sys.argv, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "numpy": np.__version__}
        Path(args.out).write_text(json.dumps({"meta": meta, "summaries": summaries, "rows": rows}, indent=2, default=float))


if __name__ == "__main__":
    main()
