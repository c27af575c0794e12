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

``--lazy-only`` times the lazy solves alone, built from the case file without the dense PTDF (for a case whose
PTDF takes too long to build here); it has no whole LP to compare with. The JSON (``--out``) holds one row per
instance and one summary per case; the markdown table goes to stdout.
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


def dispatch_without_ptdf(case: str):  # noqa: ANN201 - what LazyDispatchSolver and EconomicDispatch.sample read
    """The dispatch's parts that the lazy solves and the recipe's draws read, from the case file alone (PGLearn's
    defaults), without the dense PTDF that :class:`~hardlinear.problems.ed.EconomicDispatch` builds (a dense solve:
    over 40 minutes at case9241 on a loaded 2-core machine). For ``--lazy-only``."""
    import types

    from hardlinear.problems.dcopf import load_network
    from hardlinear.problems.ed import LOAD_HIGH, LOAD_LOW, LOAD_NOISE, THERMAL_PENALTY, load_box

    net = load_network(case)
    part = types.SimpleNamespace(network=net, load_bus=np.flatnonzero(net.pd != 0), limited=np.flatnonzero(net.rate_a > 0),
                                 load_low=LOAD_LOW, load_high=LOAD_HIGH, load_noise=LOAD_NOISE, uncertainty=1.0)
    part.centre, part.half_width = load_box(LOAD_LOW, LOAD_HIGH, LOAD_NOISE, 1.0)
    part.k = len(part.load_bus)
    part.objective_data = types.SimpleNamespace(c=np.r_[net.cost_c1 * net.base_mva, np.full(len(part.limited), THERMAL_PENALTY)])
    return part


def bench_lazy_only(case: str, instances: int, seed: int) -> tuple[dict, list[dict]]:
    """The lazy solves alone (no whole LP to compare with): their times, rounds and rows, and the objectives."""
    from hardlinear.problems.datasets import SPLIT_OFFSETS
    from hardlinear.problems.ed import EconomicDispatch
    from hardlinear.problems.ed_reference import LazyDispatchSolver

    part = dispatch_without_ptdf(case)
    xi = EconomicDispatch.sample(part, instances, generator=torch.Generator().manual_seed(seed + SPLIT_OFFSETS["test"])).numpy()
    lazy = LazyDispatchSolver(part)
    load_before, rows = loadavg(), []
    for i in range(instances):
        b = lazy.solve(xi[i])
        if b.status != "optimal":
            raise RuntimeError(f"{case} instance {i}: lazy {b.status!r}")
        rows.append({"case": case, "instance": i, "lazy_ms": 1e3 * b.time_s, "rounds": b.rounds, "rows_added": b.rows_added,
                     "lazy_objective": b.objective})
        print(f"  {case} #{i}: lazy {rows[-1]['lazy_ms']:.0f} ms ({b.rounds} rounds, {b.rows_added} rows)", file=sys.stderr, flush=True)
    lazy_ms = [r["lazy_ms"] for r in rows]
    summary = {"case": case, "instances": instances, "lazy_only": True, "lazy_ms_median": statistics.median(lazy_ms),
               "lazy_ms_min": min(lazy_ms), "lazy_ms_max": max(lazy_ms), "rounds_max": max(r["rounds"] for r in rows),
               "rows_added_max": max(r["rows_added"] for r in rows), "loadavg_before": load_before, "loadavg_after": loadavg()}
    return summary, rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--cases", nargs="+", default=["pglib_opf_case1354_pegase", "pglib_opf_case2869_pegase"])
    p.add_argument("--instances", type=int, default=3, help="test instances per case")
    p.add_argument("--seed", type=int, default=12345, help="data.test_seed (the test set's draws)")
    p.add_argument("--cache-dir", default=str(REPO / "data" / "cache"), help="where the dense PTDF is cached")
    p.add_argument("--out", default=None, help="JSON file for the rows and summaries")
    p.add_argument("--lazy-only", action="store_true",
                   help="the lazy solves alone, from the case file (no dense PTDF, so no whole LP to compare with)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    summaries, rows = [], []
    for case in args.cases:
        s, r = (bench_lazy_only(case, args.instances, args.seed) if args.lazy_only
                else bench_case(case, args.instances, args.seed, args.cache_dir))
        summaries.append(s)
        rows += r
        print(json.dumps(s), file=sys.stderr, flush=True)
    print("| case | whole LP (median ms) | lazy rows (median ms) | ratio of medians (per-instance min-max) | max rel. objective diff | rounds / rows (max) | load before / after |")
    print("|---|---|---|---|---|---|---|")
    for s in summaries:
        if s.get("lazy_only"):
            print(f"| {s['case'].replace('pglib_opf_', '')} | (not solved) | {s['lazy_ms_median']:,.1f} | - | - | "
                  f"{s['rounds_max']} / {s['rows_added_max']} | {s['loadavg_before']} / {s['loadavg_after']} |")
            continue
        print(f"| {s['case'].replace('pglib_opf_', '')} | {s['full_ms_median']:,.0f} | {s['lazy_ms_median']:,.1f} | "
              f"{s['ratio_of_medians']:.0f}x ({s['ratio_min']:.0f}-{s['ratio_max']:.0f}) | {s['max_rel_objective_diff']:.1e} | "
              f"{s['rounds_max']} / {s['rows_added_max']} | {s['loadavg_before']} / {s['loadavg_after']} |")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        meta = {"argv": sys.argv, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "numpy": np.__version__}
        Path(args.out).write_text(json.dumps({"meta": meta, "summaries": summaries, "rows": rows}, indent=2, default=float))


if __name__ == "__main__":
    main()
