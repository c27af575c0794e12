"""Audit the feasibility guarantee on the paper's six problems (hardlinear.evaluation.audit with larger counts).

Writes one row per (problem, input set, task kind, dtype) to ``results/reliability/guarantee.csv`` and prints a
summary per problem and dtype: inputs tried, box vertices tried, worst violations (float64 evaluation).

    taskset -c 1 .venv/bin/python scripts/audit_guarantee.py                 # the figures in docs/reliability.md
    .venv/bin/python scripts/audit_guarantee.py --problems dcopf_14 --uniform 200
"""

from __future__ import annotations

import argparse
import csv
import time
import warnings
from pathlib import Path

import torch

from hardlinear.evaluation.audit import ATTACKABLE, AuditConfig, as_records, audit
from hardlinear.layers import FeasibilityLayer
from hardlinear.problems import build_problem
from hardlinear.rules import solve_decision_rule

PROBLEMS = ["dcopf_14", "dcopf_30", "dcopf_57", "dcopf_118", "dcopf_200", "portfolio"]


def distinct_inputs(row: dict) -> bool:
    """Whether ``row``'s inputs are counted once: every task kind shares the uniform and vertex inputs, the
    attack inputs are computed per smooth task kind (the others reuse the network's)."""
    if row["input_set"] == "attack":
        return row["task"] in ATTACKABLE
    return row["task"] == "zeros"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", nargs="+", default=PROBLEMS)
    parser.add_argument("--uniform", type=int, default=1000, help="uniform draws per problem")
    parser.add_argument("--vertices", type=int, default=1000, help="random vertices when k > 12 (else all 2^k)")
    parser.add_argument("--attack-steps", type=int, default=8)
    parser.add_argument("--ascent-steps", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", default="data/cache", help="decision-rule cache (the harness's default)")
    parser.add_argument("--out", default="results/reliability/guarantee.csv")
    args = parser.parse_args()
    torch.set_num_threads(1)

    records, summary = [], []
    for name in args.problems:
        problem = build_problem(name)
        with warnings.catch_warnings(record=True):  # the portfolio's t* = 0 rule warns; t* is reported below
            warnings.simplefilter("always")
            rule = solve_decision_rule(problem, cache_dir=args.cache_dir, require_positive_margin=name != "portfolio")
        cfg = AuditConfig(
            uniform=args.uniform, vertex_limit=args.vertices, attack_steps=args.attack_steps,
            ascent_steps=args.ascent_steps, seed=args.seed,
        )
        t0 = time.perf_counter()
        rows = as_records(audit(problem, FeasibilityLayer(problem.family, rule), cfg))
        elapsed = time.perf_counter() - t0
        for r in rows:
            r.update(t_star=rule.t_star, k=problem.k, n=problem.n)
        records += rows
        for dtype in ("float64", "float32"):
            mine = [r for r in rows if r["dtype"] == dtype]
            vertex_rows = {r["inputs"] for r in mine if r["input_set"] == "vertices" and r["task"] == "zeros"}
            summary.append(
                {
                    "problem": name,
                    "dtype": dtype,
                    "t_star": rule.t_star,
                    "pairs": sum(r["inputs"] for r in mine),
                    "inputs": sum(r["inputs"] for r in mine if distinct_inputs(r)),
                    "vertices": f"{vertex_rows.pop()}" + (" (all)" if problem.k <= cfg.all_vertices_k else f" of 2^{problem.k}"),
                    "eq_rel": max(r["eq_rel_worst"] for r in mine),
                    "eq_c": max(r["eq_bound_ratio"] for r in mine),
                    "ineq_abs": max(r["ineq_abs_worst"] for r in mine),
                    "ineq_rel": max(r["ineq_rel_worst"] for r in mine),
                    "nonfinite": sum(r["nonfinite_outputs"] for r in mine),
                    "seconds": elapsed,
                }
            )
        print(f"{name}: {len(rows)} groups in {elapsed:.1f} s", flush=True)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)

    print(f"\nwrote {len(records)} rows to {out}\n")
    print("| problem | dtype | t* | inputs | (input, output) pairs | vertices | worst eq. rel. | eq. c' | worst ineq. abs. | worst ineq. rel. | non-finite |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for s in summary:
        print(
            f"| {s['problem']} | {s['dtype']} | {s['t_star']:.3g} | {s['inputs']} | {s['pairs']} | {s['vertices']} | "
            f"{s['eq_rel']:.1e} | {s['eq_c']:.1f} | {s['ineq_abs']:.1e} | {s['ineq_rel']:.1e} | {s['nonfinite']} |"
        )


if __name__ == "__main__":
    main()
