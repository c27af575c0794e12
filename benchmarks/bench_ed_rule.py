"""The economic dispatch's decision rule by each solver: solve time, peak memory and the verified t*.

Each (case, input set, solver) solves the margin rule (``solve_decision_rule``, nothing cached) in a fresh Python
process, so that its peak memory (``ru_maxrss``) is its own; the problem build is not timed. ``rank_one``
(:mod:`hardlinear.rules.rank_one`) against the solver ``auto`` picks: the two must agree on ``t*``. Examples::

    python benchmarks/bench_ed_rule.py --cases pglib_opf_case1354_pegase --solvers rank_one auto
    python benchmarks/bench_ed_rule.py --cases pglib_opf_case6470_rte --input-sets box recipe_total --solvers rank_one

A child that fails (no rule: ``t* <= 0``) is recorded with its error's first line and the ``t*`` it names, never
dropped. The JSON (``--out``) holds one row per child; the markdown table goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def child(case: str, form: str, input_set: str, solver: str) -> dict:
    """One solve in this process: the row, printed as JSON by ``--child``."""
    import resource

    from hardlinear.problems import build_problem
    from hardlinear.rules import DecisionRuleInfeasible, solve_decision_rule

    problem = build_problem("ed", case=case, form=form, input_set=input_set)
    row = {"case": case, "form": form, "input_set": input_set, "solver": solver, "inputs": problem.compact.box.k}
    start = time.perf_counter()
    try:
        rule = solve_decision_rule(problem, solver=solver, find_max_uncertainty=False)
        row.update(status="ok", t_star=rule.t_star, used=rule.info["solver"])
    except DecisionRuleInfeasible as err:
        row.update(status="no rule", t_star=err.t_star, note=str(err).splitlines()[0][:200])
    row["solve_s"] = time.perf_counter() - start
    row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def run(case: str, form: str, input_set: str, solver: str, timeout: float) -> dict:
    cmd = [sys.executable, __file__, "--child", case, form, input_set, solver]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"case": case, "form": form, "input_set": input_set, "solver": solver, "status": f"> {timeout:g} s (killed)"}
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"case": case, "form": form, "input_set": input_set, "solver": solver, "status": f"failed: {tail[:200]}"}
    return json.loads(lines[-1])


def table(rows: list[dict]) -> str:
    lines = ["| case | form | input set | solver (used) | inputs | status | t* | solve s | peak MB |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t = f"{r['t_star']:.6g}" if isinstance(r.get("t_star"), float) else "-"
        used = f"{r['solver']} ({r['used']})" if r.get("used") and r["used"] != r["solver"] else r["solver"]
        lines.append(f"| {r['case'].replace('pglib_opf_', '')} | {r['form']} | {r['input_set']} | {used} | {r.get('inputs', '-')} | "
                     f"{r['status']} | {t} | {r.get('solve_s', float('nan')):.2f} | {r.get('peak_rss_mb', float('nan')):.0f} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", nargs="+", default=["pglib_opf_case1354_pegase"])
    p.add_argument("--solvers", nargs="+", default=["rank_one", "auto"])
    p.add_argument("--input-sets", nargs="+", default=["box"], choices=("box", "recipe", "recipe_total"))
    p.add_argument("--form", default="inequality", choices=("standard", "inequality"))
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds before a child is killed (recorded as such)")
    p.add_argument("--out", default=str(REPO / "results" / "bench" / "ed_rule.json"))
    p.add_argument("--child", nargs=4, metavar=("CASE", "FORM", "INPUT_SET", "SOLVER"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    rows = []
    for case in args.cases:
        for input_set in args.input_sets:
            for solver in args.solvers:
                rows.append(run(case, args.form, input_set, solver, args.timeout))
                print(table(rows[-1:]).splitlines()[-1], flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"form": args.form, "rows": rows}, indent=1) + "\n")
    print(table(rows))


if __name__ == "__main__":
    main()
