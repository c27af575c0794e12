"""Batch-1 and batch-1024 inference of E2ELR and the proposed method on the economic dispatch (issues 42 and 57):
each before and after the line rows went through the factor of ``Bbus``, beside its floor and the reference solve.

Why a benchmark of its own: the runs' own ``test/time_ms`` was taken while other jobs shared the 2 cores, at
different loads for different runs, and their throughput at batch 4096; the issues ask for batch 1 and 1024 on
one footing. Here every (case, method) is timed in one process, one after another, one thread, from the
configuration the runs used (``conf/problem_method/ed_<method>.yaml``: network, dtype, method options; the
inequality form, ``--problem-overrides``), with the decision rule from ``--cache-dir``.

Per row, in one process: **before** (``problem.flows=dense`` and, for the proposed method, the unfused layer: the
code before issue 57) and **after** (``problem.flows`` as configured, ``auto`` by default: the faster of the sparse
factor and the dense PTDF as timed on the case, and the proposed method's dispatch path,
:mod:`hardlinear.layers.dispatch_blend`); the largest difference of their outputs; the measured floor
(:func:`floors.dispatch_floor`: the network, one sparse flow solve, the method's own passes, and for the proposed
method the test of its output's rows) and the ratio to it;
the reference LP's time per instance from the committed records (``data/ref_solve_ms``, every distinct value).

The weights are freshly initialised. E2ELR's repairs run the same operations whatever the weights; the proposed
method's entropic map iterates until its balance converges (typically 5-10 steps, data-dependent), so a trained
network's count can differ; with the refinement exact, no row reaches the layer either way.

    python benchmarks/bench_ed_inference.py --cases pglib_opf_case1354_pegase pglib_opf_case2869_pegase \
        --proposed-variants 'method.rule_solver=rank_one' --out results/ed/latency_flows.json

Batch 1: ``--instances`` inputs one at a time, each timed; median and interquartile range. Batch 1024:
``--repeats`` calls on one batch; median. A method that cannot be set up on a case (no rule) is a row saying why.
"""

from __future__ import annotations

from hardlinear.runtime.threads import size_native_pools

# one thread in numpy's pools too, before numpy loads: the problem is then built to the same bits as the runs built
# it (threads=1), so their decision rules load from the cache instead of being solved again (case1888: 9 min)
size_native_pools(1)

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import floors  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

METHODS = ("e2elr", "proposed")


def reference_solve_ms(case: str, root: Path = REPO / "results" / "ed") -> list[float]:
    """``data/ref_solve_ms`` (the reference LP's time per instance, as the runs recorded it) of every committed dispatch
    record of ``case``, distinct values: the reference the proxies are compared with."""
    found = set()
    for path in root.glob("records*/*/record.json"):
        record = json.loads(path.read_text())
        value = record.get("row", {}).get("data/ref_solve_ms")
        if record.get("config", {}).get("problem", {}).get("case") == case and value is not None:
            found.add(float(value))
    return sorted(found)


def _single_calls_ms(m, xi: torch.Tensor, warmup: int, instances: int) -> list[float]:
    """``m.predict`` on ``instances`` inputs one at a time, after ``warmup`` untimed calls: each call's ms."""
    for i in range(warmup):
        m.predict(xi[i : i + 1])
    times = []
    for i in range(instances):
        t0 = time.perf_counter()
        m.predict(xi[i : i + 1])
        times.append(1e3 * (time.perf_counter() - t0))
    return times


def _latency(m, xi: torch.Tensor, args: argparse.Namespace) -> dict:
    """Batch 1 (``instances`` inputs one at a time: median and interquartile range) and batch ``args.batch`` (median
    of ``repeats`` calls)."""
    times = _single_calls_ms(m, xi, args.warmup, args.instances)
    q = statistics.quantiles(times, n=4)
    median_s, calls = common.median_time(lambda: m.predict(xi[: args.batch]), "cpu", args.repeats, 1)
    return {"batch1_ms": statistics.median(times), "batch1_iqr_ms": q[2] - q[0], "batchN_ms": 1e3 * median_s, "calls": calls}


def _floor(m, xi: torch.Tensor, args: argparse.Namespace) -> dict:
    """:func:`floors.dispatch_floor` at batch 1 and batch ``args.batch``, in ms."""
    out = {}
    for label, batch in (("batch1", xi[:1]), ("batchN", xi[: args.batch])):
        repeats = args.instances if batch.shape[0] == 1 else args.repeats
        pieces = floors.dispatch_floor(m, batch, lambda fn, r=repeats: common.median_time(fn, "cpu", r, 2)[0])
        out.update({f"{label}_{key.removesuffix('_s')}_ms": 1e3 * v for key, v in pieces.items()})
    return out


def time_case(case: str, method: str, args: argparse.Namespace, overrides: tuple[str, ...] = ()) -> dict:
    overrides = (*args.problem_overrides.split(), *overrides)
    cfg, problem, dtype, m, failure = common.setup_ed_method(case, method, overrides, args.cache_dir)
    row = {"case": case.replace("pglib_opf_", ""), "method": method, "k": problem.k, "n": problem.n}
    if m is None:
        return {**row, "status": "failed", "note": failure}
    m.eval()
    # the problem options scripts/maintainers/ed_table.py shows beside the variant (the form, the rule's input set)
    extra = ([] if problem.form == "standard" else [f"form={problem.form}"]) + (
        [f"input_set={problem.input_set}"] if getattr(problem, "input_set", "box") != "box" else [])
    row["variant"] = " ".join(v for v in (m.describe().get("variant", ""), *extra) if v)
    xi = problem.sample(max(args.instances, args.batch), generator=torch.Generator().manual_seed(1)).to(dtype)
    setting = problem.flows
    with torch.no_grad():
        # before: the dense PTDF and the unfused layer (this commit's parent); after: the setting (auto: timed per
        # case) and the dispatch's own inference path (hardlinear.layers.dispatch_blend)
        problem.flows, problem._flow_choice, fused = "dense", {}, getattr(m, "fused_inference", None)
        if fused is not None:
            m.fused_inference = False
        if args.skip_before:  # the large cases: the unfused layer's batch of 1,024 takes minutes a call
            before, y_before = {}, None
        else:
            before = _latency(m, xi, args)
            y_before = m.predict(xi[: args.batch]).y
        problem.flows, problem._flow_choice = setting, {}
        if fused is not None:
            m.fused_inference = fused
        after = _latency(m, xi, args)
        y_after = m.predict(xi[: args.batch]).y
        chosen = problem.flow_mode(xi)
        floor = _floor(m, xi, args)
    ref = reference_solve_ms(case, REPO / args.reference_root)  # an absolute path stays itself
    out = {**row, "status": "ok", "flows": f"{setting} -> {chosen}", **getattr(problem, "flow_timings", {}),
           **{f"before_{k}": v for k, v in before.items()}, **after, **floor,
           "outputs_max_rel_diff": None if y_before is None else float((y_after - y_before).abs().max() / (1.0 + y_before.abs().max())),
           "ref_solve_ms": ref}
    for label in ("batch1", "batchN"):
        out[f"{label}_floor_ratio"] = out[f"{label}_ms"] / out[f"{label}_floor_ms"]
    if ref:
        out["speedup_vs_ref_batch1"] = min(ref) / out["batch1_ms"]
    return out


def ratio_rounds(case: str, args: argparse.Namespace) -> list[dict]:
    """The proposed method against E2ELR in alternating rounds (issue 57's target: within 1.2x at batch 1 and at
    ``--batch``), all set up at once: per round each method's median over ``--ratio-instances`` single calls and over
    ``--ratio-batch-calls`` calls on the batch, the order rotated from round to round (a slow spell of the shared machine then falls on every
    method in turn); per proposed variant, its ratio to E2ELR in each round, their median and range. Why beside the
    rows: each row is timed in its own stretch of minutes, so the ratio of two rows carries the machine's drift."""
    models = []
    for method, overrides in common.ed_method_runs(["e2elr", "proposed"], args.proposed_variants):
        _, problem, dtype, m, failure = common.setup_ed_method(case, method, (*args.problem_overrides.split(), *overrides), args.cache_dir)
        if m is None:
            return [{"case": case.replace("pglib_opf_", ""), "status": "failed", "note": f"{method}: {failure}"}]
        m.eval()
        xi = problem.sample(max(args.ratio_instances, args.batch), generator=torch.Generator().manual_seed(1)).to(dtype)
        models.append((method if method == "e2elr" else m.describe().get("variant", ""), m, xi))
    times: dict[str, dict[str, list[float]]] = {label: {"batch1": [], "batchN": []} for label, _, _ in models}
    with torch.no_grad():
        for r in range(args.ratio_rounds):
            for label, m, xi in models[r % len(models):] + models[: r % len(models)]:
                single = _single_calls_ms(m, xi, args.warmup, args.ratio_instances)
                batched_s, _ = common.median_time(lambda m=m, xi=xi: m.predict(xi[: args.batch]), "cpu", args.ratio_batch_calls, 0)
                times[label]["batch1"].append(statistics.median(single))
                times[label]["batchN"].append(1e3 * batched_s)
    out = []
    for label, _, _ in models[1:]:
        row = {"case": case.replace("pglib_opf_", ""), "status": "ok", "variant": label, "rounds": args.ratio_rounds,
               "instances": args.ratio_instances, "batch": args.batch}
        for b in ("batch1", "batchN"):
            ratios = [p / e for p, e in zip(times[label][b], times["e2elr"][b])]
            row.update({f"{b}_ratios": ratios, f"{b}_ratio_median": statistics.median(ratios), f"{b}_ratio_min": min(ratios),
                        f"{b}_ratio_max": max(ratios), f"{b}_ms": times[label][b], f"{b}_e2elr_ms": times["e2elr"][b]})
        common.log(f"[ed inference] {row['case']} proposed {label} / e2elr over {args.ratio_rounds} rounds: batch 1 "
                   f"{row['batch1_ratio_median']:.2f}x ({row['batch1_ratio_min']:.2f}-{row['batch1_ratio_max']:.2f}), "
                   f"batch {args.batch} {row['batchN_ratio_median']:.2f}x ({row['batchN_ratio_min']:.2f}-{row['batchN_ratio_max']:.2f})")
        out.append(row)
    return out


def describe(r: dict) -> str:
    if "before_batch1_ms" not in r:
        return (f"flows {r['flows']}: batch 1 {r['batch1_ms']:.2f} ms (floor {r['batch1_floor_ms']:.2f}), batch N "
                f"{r['batchN_ms']:.1f} ms (floor {r['batchN_floor_ms']:.1f}); reference {r['ref_solve_ms']} ms")
    return (f"flows {r['flows']}: batch 1 {r['before_batch1_ms']:.2f} -> {r['batch1_ms']:.2f} ms (floor {r['batch1_floor_ms']:.2f}), "
            f"batch N {r['before_batchN_ms']:.1f} -> {r['batchN_ms']:.1f} ms (floor {r['batchN_floor_ms']:.1f}); reference "
            f"{r['ref_solve_ms']} ms; outputs differ by {r['outputs_max_rel_diff']:.1e}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", nargs="+", required=True)
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--instances", type=int, default=200)
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--cache-dir", default=str(common.DEFAULT_CACHE))
    p.add_argument("--proposed-variants", nargs="+", default=[""], metavar="OVERRIDES",
                   help="the proposed method's variants to time, each a space-separated list of Hydra overrides "
                        "('' is conf/problem_method/ed_proposed.yaml as it is), e.g. '' 'method.refine=problem'")
    p.add_argument("--problem-overrides", default="problem.form=inequality",
                   help="Hydra overrides for every method's problem (the study's runs used the inequality form)")
    p.add_argument("--skip-before", action="store_true",
                   help="time only the current path and its floor, not the code before the factor (dense PTDF, unfused "
                        "layer): minutes a call at case6470 and up, where the records' test/time_ms say what it took")
    p.add_argument("--reference-root", default="results/ed",
                   help="where the records whose data/ref_solve_ms is the reference solve's time are")
    p.add_argument("--ratio-rounds", type=int, default=0,
                   help="also time the proposed method against E2ELR in this many alternating rounds (ratio_rounds)")
    p.add_argument("--ratio-instances", type=int, default=30, help="single calls a method a round (their median)")
    p.add_argument("--ratio-batch-calls", type=int, default=3, help="calls on the batch a method a round (their median)")
    p.add_argument("--out", default="results/ed/inference.json")
    args = p.parse_args(argv)
    if args.ratio_rounds > 0 and not {"e2elr", "proposed"} <= set(args.methods):
        p.error("--ratio-rounds compares the proposed method with E2ELR: keep both in --methods")
    torch.set_num_threads(1)
    env = common.environment("cpu", 1)
    env["loadavg_start"] = os.getloadavg()
    rows = common.ed_rows(args, time_case, describe, "ed inference")
    ratios = [row for case in args.cases for row in ratio_rounds(case, args)] if args.ratio_rounds > 0 else []
    env["loadavg_end"] = os.getloadavg()
    common.write_rows(args.out, env, vars(args), rows, "ed inference", ratios=ratios)


if __name__ == "__main__":
    main()
