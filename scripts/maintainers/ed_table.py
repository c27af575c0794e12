"""The economic dispatch comparison (issue 42) from its committed records, as a Markdown table.

    python scripts/maintainers/ed_table.py                        # records under results/ed (study ed_pglearn)
    python scripts/maintainers/ed_table.py --results results/ed --study ed_pglearn --out results/ed/table.md \
        --inference results/ed/inference.json           # + the batch-1 / batch-1024 timings of one benchmark run

Per case and method (with its variant, its form where it is not the standard one, and ``input_set=...`` where
the rule covers another set than the box: the recipe's polytope, or the box cut to its total-load range; and
``epochs=N of M`` where a run trained fewer epochs than its problem's schedule, so that no such row passes for an
equal-epoch figure): seeds, mean over seeds of the mean test gap, the worst test gap of any
seed, the worst equality and inequality violations (relative norms) of any seed, the mean batch-1 time per
instance (``test/time_ms``, taken by each run at its own load) and training seconds; with ``--inference``, the
batch-1 and batch-1024 times of ``benchmarks/bench_ed_inference.py`` (one process, one footing) for the method and
variant it timed; the method with the lowest mean gap among the exactly feasible
ones (zero inequality violation) is marked per case. Below it, per case, E2ELR beside the proposed variant chosen
on the validation gap (``selection_lines``). Runs that did not finish ``ok`` are listed with their status.
"""

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from hardlinear.harness.results import load_records

CASE_ORDER = ("case14_ieee", "case30_ieee", "case57_ieee", "case89_pegase", "case118_ieee", "case300_ieee", "case1354_pegase",
              "case1888_rte", "case2869_pegase", "case6470_rte", "case9241_pegase", "case13659_pegase")


def case_key(case: str) -> tuple[int, str]:
    name = case.split(" ")[0]
    return (CASE_ORDER.index(name) if name in CASE_ORDER else len(CASE_ORDER), name)


def pct(value: float) -> str:
    return f"{value:.4f}" if abs(value) < 1000 else f"{value:,.0f}"


def bench_cells(inference: dict | None, case: str, method: str, variant) -> str:
    """`` b1 ms | b1024 us |`` cells of the benchmark row of this case, method and variant (``-`` where none)."""
    if inference is None:
        return ""
    variant = variant if isinstance(variant, str) else ""
    for r in inference["rows"]:
        if r["case"] == case and r["method"] == method and r.get("variant", "") == variant and r["status"] == "ok":
            return f" {r['batch1_ms']:.2f} | {r['batch1024_us_per_instance']:.1f} |"
    return " - | - |"


def row_label(method: str, variant, form: str) -> tuple[str, str]:
    """``(label, variant)`` of a row: the method with its variant and form in brackets where it has them."""
    variant = " ".join(v for v in (variant if isinstance(variant, str) else "", form if isinstance(form, str) else "") if v)
    return (method if not variant else f"{method} ({variant})"), variant


def table(df, inference: dict | None = None) -> str:
    df = df.assign(case=[p.replace("ed_", "", 1) + ("" if u is None or u != u or float(u) == 1.0 else f" (uncertainty {float(u):g})")
                         for p, u in zip(df["problem"].astype(str), df["uncertainty"])])
    if "form" not in df:
        df = df.assign(form="standard")
    # the problem's options that change the method's row, not the instances: its form, and the input set the rule
    # covers (problem.input_set): shown beside the variant, as benchmarks/bench_ed_inference.py labels its rows
    def column(name: str) -> pd.Series:  # a record column, or None on every row where no record has it
        return df[name] if name in df else pd.Series([None] * len(df), index=df.index)

    recipe = column("cfg.problem.input_set")
    # a run that trained fewer epochs than its problem's schedule (stopped short and evaluated from its saved state)
    # is its own row and says so: its gap is not an equal-epoch figure
    short = [f"epochs={float(t):g} of {int(p)}" if pd.notna(t) and pd.notna(p) and float(t) < float(p) else ""
             for t, p in zip(column("train/epochs"), column("cfg.problem.train.epochs"))]
    df = df.assign(form=[" ".join(([] if f in ("standard", None) or f != f else [f"form={f}"])
                                  + ([f"input_set={r}"] if isinstance(r, str) and r != "box" else []) + ([s] if s else []))
                         for f, r, s in zip(df["form"], recipe, short)])
    ok = df[df["status"].astype(str) == "ok"]
    bench_head = (" batch 1 ms (bench) | batch 1024 us / instance (bench) |", "---|---|") if inference else ("", "")
    lines = [
        "| case | method | seeds | gap mean % | gap worst % | eq. viol. worst | ineq. viol. worst | ms / instance | train s |" + bench_head[0],
        "|---|---|---|---|---|---|---|---|---|" + bench_head[1],
    ]
    for case in sorted(ok["case"].unique(), key=case_key):
        rows = []
        for (method, variant, form), g in ok[ok["case"] == case].groupby(["method", "variant", "form"], dropna=False):
            label, variant = row_label(method, variant, form)
            bench = bench_cells(inference, case, method, variant) if " (" not in case else (" - | - |" if inference else "")
            rows.append((label, len(g), g["test/gap_mean"].mean(), g["test/gap_worst"].max(), g["test/eq_viol_worst"].max(),
                         g["test/ineq_viol_worst"].max(), g["test/time_ms"].mean(), g["train/time_s"].mean(), bench))
        feasible = [r for r in rows if r[5] == 0]
        best = min(feasible, key=lambda r: r[2])[0] if feasible else None
        for label, n, gap, worst, eq, ineq, ms, train, bench in sorted(rows, key=lambda r: r[0]):
            mark = " **(best)**" if label == best else ""
            lines.append(f"| {case} | {label}{mark} | {n} | {pct(gap)} | {pct(worst)} | {eq:.1e} | "
                         f"{ineq:.1e} | {ms:.2f} | {train:.1f} |{bench}")
    lines += selection_lines(ok)
    other = df[df["status"].astype(str) != "ok"]
    if len(other):
        lines += ["", "Not ok:", ""]
        for r in other.itertuples():
            reason = str(getattr(r, "reason", "") or "").splitlines()
            label, _ = row_label(r.method, getattr(r, "variant", ""), r.form)
            lines.append(f"- {r.case} {label} seed {int(r.seed)}: {r.status}" + (f" ({reason[0][:200]})" if reason else ""))
    return "\n".join(lines) + "\n"


def selection_lines(ok) -> list[str]:
    """Per case, E2ELR beside the proposed variant picked on the **validation** gap: among the proposed method's
    variants (with their form and input set) run at the most seeds at that case, the lowest mean ``val/gap_mean``
    (each seed's validation set is its own, the same for every variant of that seed). Its test figures are what
    the choice gives; no test figure takes part in it."""
    if "val/gap_mean" not in ok:
        return []
    rows = []
    for case in sorted(ok["case"].unique(), key=case_key):
        here = ok[ok["case"] == case]
        e2elr, proposed = here[here["method"] == "e2elr"], here[here["method"] == "proposed"]
        if e2elr.empty or proposed.empty:
            continue
        groups = list(proposed.groupby(["variant", "form"], dropna=False))
        most = max(len(g) for _, g in groups)
        (variant, form), pick = min(((k, g) for k, g in groups if len(g) == most), key=lambda kg: kg[1]["val/gap_mean"].mean())
        label = " ".join(v for v in (variant if isinstance(variant, str) else "", form) if v)
        e_mean, p_mean = e2elr["test/gap_mean"].mean(), pick["test/gap_mean"].mean()
        winner = "proposed" if p_mean < e_mean else ("tie" if p_mean == e_mean else "E2ELR")
        rows.append(f"| {case} | {len(e2elr)}, {pct(e_mean)} ({pct(e2elr['test/gap_worst'].max())}) | {label} | {len(pick)} | "
                    f"{pct(pick['val/gap_mean'].mean())} | {pct(p_mean)} ({pct(pick['test/gap_worst'].max())}) | {winner} |")
    if not rows:
        return []
    return ["", "Chosen on validation (per case, the proposed variant with the lowest mean validation gap among those "
            "run at the most seeds; test figures beside E2ELR's):", "",
            "| case | E2ELR: seeds, gap mean % (worst) | proposed, chosen on validation | seeds | val gap % | "
            "test gap mean % (worst) | lower mean test gap |", "|---|---|---|---|---|---|---|", *rows]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", nargs="+", default=["results/ed"], help="record folders")
    parser.add_argument("--study", default="ed_pglearn", help="keep the records of this study (empty: all)")
    parser.add_argument("--out", default=None, help="Markdown file to write (default: print)")
    parser.add_argument("--inference", nargs="+", default=None, help="benchmarks/bench_ed_inference.py's JSONs: two more columns")
    args = parser.parse_args()
    roots = [r for r in args.results if Path(r).exists()]
    if not roots:
        print(f"error: none of {args.results} exists; run the commands of docs/peer_methods.md first", file=sys.stderr)
        return 1
    df = load_records(roots, quiet=True)
    if args.study:
        df = df[df["study"].astype(str) == args.study]
    df = df[df["problem"].astype(str).str.startswith("ed_")]
    inference = {"rows": [r for f in args.inference for r in json.loads(Path(f).read_text())["rows"]]} if args.inference else None
    text = table(df, inference)
    if args.out:
        Path(args.out).write_text(text)
        print(args.out)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
