"""The economic dispatch comparison (issue 42) from its committed records, as a Markdown table.

    python scripts/ed_table.py                        # records under results/ed (study ed_pglearn)
    python scripts/ed_table.py --results results/ed --study ed_pglearn --out results/ed/table.md

Per case and method (with its variant): seeds, mean over seeds of the mean test gap, the worst test gap of any
seed, the worst equality and inequality violations (relative norms) of any seed, the mean batch-1 time per
instance (``test/time_ms``) and training seconds; the method with the lowest mean gap among the exactly feasible
ones (zero inequality violation) is marked per case. Runs that did not finish ``ok`` are listed with their status.
"""

import argparse
import sys
from pathlib import Path

from hardlinear.harness.results import load_records

CASE_ORDER = ("case14_ieee", "case30_ieee", "case57_ieee", "case89_pegase", "case118_ieee", "case300_ieee", "case1354_pegase")


def case_key(case: str) -> tuple[int, str]:
    name = case.split(" ")[0]
    return (CASE_ORDER.index(name) if name in CASE_ORDER else len(CASE_ORDER), name)


def pct(value: float) -> str:
    return f"{value:.4f}" if abs(value) < 1000 else f"{value:,.0f}"


def table(df) -> str:
    df = df.assign(case=[p.replace("ed_", "", 1) + ("" if u is None or u != u or float(u) == 1.0 else f" (uncertainty {float(u):g})")
                         for p, u in zip(df["problem"].astype(str), df["uncertainty"])])
    ok = df[df["status"].astype(str) == "ok"]
    lines = [
        "| case | method | seeds | gap mean % | gap worst % | eq. viol. worst | ineq. viol. worst | ms / instance | train s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for case in sorted(ok["case"].unique(), key=case_key):
        rows = []
        for (method, variant), g in ok[ok["case"] == case].groupby(["method", "variant"], dropna=False):
            label = method if not isinstance(variant, str) or not variant else f"{method} ({variant})"
            rows.append((label, len(g), g["test/gap_mean"].mean(), g["test/gap_worst"].max(), g["test/eq_viol_worst"].max(),
                         g["test/ineq_viol_worst"].max(), g["test/time_ms"].mean(), g["train/time_s"].mean()))
        feasible = [r for r in rows if r[5] == 0]
        best = min(feasible, key=lambda r: r[2])[0] if feasible else None
        for label, n, gap, worst, eq, ineq, ms, train in sorted(rows, key=lambda r: r[0]):
            mark = " **(best)**" if label == best else ""
            lines.append(f"| {case} | {label}{mark} | {n} | {pct(gap)} | {pct(worst)} | {eq:.1e} | "
                         f"{ineq:.1e} | {ms:.2f} | {train:.1f} |")
    other = df[df["status"].astype(str) != "ok"]
    if len(other):
        lines += ["", "Not ok:", ""]
        for r in other.itertuples():
            reason = str(getattr(r, "reason", "") or "").splitlines()
            lines.append(f"- {r.case} {r.method} seed {int(r.seed)}: {r.status}" + (f" ({reason[0][:200]})" if reason else ""))
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", nargs="+", default=["results/ed"], help="record folders")
    parser.add_argument("--study", default="ed_pglearn", help="keep the records of this study (empty: all)")
    parser.add_argument("--out", default=None, help="Markdown file to write (default: print)")
    args = parser.parse_args()
    roots = [r for r in args.results if Path(r).exists()]
    if not roots:
        print(f"error: none of {args.results} exists; run the commands of docs/peer_methods.md first", file=sys.stderr)
        return 1
    df = load_records(roots, quiet=True)
    if args.study:
        df = df[df["study"].astype(str) == args.study]
    df = df[df["problem"].astype(str).str.startswith("ed_")]
    text = table(df)
    if args.out:
        Path(args.out).write_text(text)
        print(args.out)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
