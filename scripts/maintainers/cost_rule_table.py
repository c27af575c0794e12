"""The margin-only rule against the cost-aware one (docs/cost_aware_rule.md).

    python scripts/maintainers/cost_rule_table.py results/investigations/cost_rule.csv results/investigations/cost_rule

    python scripts/maintainers/cost_rule_table.py results/investigations/cost_rule.csv results/investigations/cost_rule \
        --baseline results/paper/runs.csv

The runs are read with ``hardlinear.harness.results.load_records`` from record folders and legacy results CSVs alike
(the first runs of this table were written to a CSV before per-run records existed).

One row per problem: the rule's verified margin t under each objective, the LDR's test gap, and the proposed
method's test gap (mean over seeds, every seed listed; the margin-only seeds from ``--baseline`` when given) with
the worst inequality violation of the cost-aware runs. Rules are told apart by the results' ``variant`` column
("" margin-only, "rule=cost<fraction>" cost-aware).
"""

from __future__ import annotations

import argparse

import pandas as pd

from hardlinear.harness.results import load_records

BASELINE_EXPERIMENTS = ("table_lp", "table_qp_main", "table_qp_add")
ORDER = ["dcopf_14", "dcopf_30", "dcopf_57", "dcopf_118", "dcopf_200", "portfolio"]


def _label(row: pd.Series) -> str:
    return f"{row['problem']}{'_qp' if row['objective'] == 'qp' and row['problem'] != 'portfolio' else ''}"


def _prepare(df: pd.DataFrame) -> pd.DataFrame:
    df = df[df["status"] == "ok"].copy() if "status" in df else df.copy()
    df["variant"] = df["variant"].fillna("")
    df["label"] = df.apply(_label, axis=1)
    df["rule"] = df["variant"].map(lambda v: "cost" if "rule=cost" in v else "margin")
    return df


def _gaps(rows: pd.DataFrame, one: bool = False) -> str:
    """``mean % (seed gaps)`` over the last row of each seed, or the one value for a deterministic method."""
    if rows.empty:
        return "-"
    per_seed = rows.sort_values("timestamp").groupby("seed")["test/gap_mean"].last()
    if one:
        return f"{per_seed.iloc[0]:.2f} %"
    return f"{per_seed.mean():.2f} % ({', '.join(f'{v:.2f}' for v in per_seed)})"


def _pick(df: pd.DataFrame, label: str, method: str, rule: str) -> pd.DataFrame:
    return df[(df["label"] == label) & (df["method"] == method) & (df["rule"] == rule)]


def table(df: pd.DataFrame, baseline: pd.DataFrame | None = None) -> str:
    df = _prepare(df)
    base = None
    if baseline is not None:  # the paper tables' own rows: not the pre-training ablation (also named "proposed")
        base = _prepare(baseline[baseline["experiment"].isin(BASELINE_EXPERIMENTS)])
    lines = [
        "| problem | t* margin-only | t cost-aware | LDR gap margin | LDR gap cost | proposed gap margin (seeds; store) "
        "| proposed margin, rerun s0 | proposed gap cost (seeds) | worst ineq. viol. (cost) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    labels = sorted(df["label"].unique(), key=lambda s: (ORDER.index(s.replace("_qp", "")) if s.replace("_qp", "") in ORDER else 99, s))
    for label in labels:
        t = {rule: df[(df["label"] == label) & (df["rule"] == rule)]["offline/t_star"].dropna() for rule in ("margin", "cost")}
        t_text = {rule: (f"{v.iloc[0]:.4g}" if len(v) else "-") for rule, v in t.items()}
        stored = _gaps(_pick(base, label, "proposed", "margin")) if base is not None else "-"
        cost_rows = df[(df["label"] == label) & (df["rule"] == "cost")]
        viol = cost_rows["test/ineq_viol_worst"].max() if len(cost_rows) else float("nan")
        lines.append(
            f"| {label} | {t_text['margin']} | {t_text['cost']} | {_gaps(_pick(df, label, 'ldr', 'margin'), True)} | "
            f"{_gaps(_pick(df, label, 'ldr', 'cost'), True)} | {stored} | {_gaps(_pick(df, label, 'proposed', 'margin'))} | "
            f"{_gaps(_pick(df, label, 'proposed', 'cost'))} | {viol:.1e} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", help="record folders and/or results CSVs with ldr and proposed runs under both rule objectives")
    parser.add_argument("--baseline", help="a store with the margin-only proposed rows at several seeds (results/paper/runs.csv)")
    args = parser.parse_args()
    baseline = load_records([args.baseline], quiet=True) if args.baseline else None
    print(table(load_records(args.results, quiet=True), baseline))


if __name__ == "__main__":
    main()
