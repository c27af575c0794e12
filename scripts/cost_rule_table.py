"""The margin-only rule against the cost-aware one, from a results CSV (docs/cost_aware_rule.md).

    python scripts/cost_rule_table.py results/investigations/cost_rule.csv

One row per problem: the rule's verified margin t under each objective, the LDR's test gap, and the proposed
method's test gap (mean over seeds, every seed listed) with its worst inequality violation. Rules are told apart
by the results' ``variant`` column ("" margin-only, "rule=cost<fraction>" cost-aware).
"""

from __future__ import annotations

import argparse

import pandas as pd

ORDER = ["dcopf_14", "dcopf_30", "dcopf_57", "dcopf_118", "dcopf_200", "portfolio"]


def _label(row: pd.Series) -> str:
    return f"{row['problem']}{'_qp' if row['objective'] == 'qp' and row['problem'] != 'portfolio' else ''}"


def table(df: pd.DataFrame) -> str:
    df = df[df["status"] == "ok"].copy() if "status" in df else df.copy()
    df["variant"] = df["variant"].fillna("")
    df["label"] = df.apply(_label, axis=1)
    df["rule"] = df["variant"].map(lambda v: "cost" if "rule=cost" in v else "margin")
    lines = [
        "| problem | t* margin-only | t cost-aware | LDR gap margin | LDR gap cost | proposed gap margin (seeds) | proposed gap cost (seeds) | worst ineq. viol. |",
        "|---|---|---|---|---|---|---|---|",
    ]
    labels = sorted(df["label"].unique(), key=lambda s: (ORDER.index(s.replace("_qp", "")) if s.replace("_qp", "") in ORDER else 99, s))
    for label in labels:
        sub = df[df["label"] == label]

        def cell(method: str, rule: str, key: str = "test/gap_mean") -> str:
            rows = sub[(sub["method"] == method) & (sub["rule"] == rule)].sort_values("seed")
            if rows.empty:
                return "-"
            if method == "ldr":
                return f"{rows[key].iloc[0]:.2f} %"
            seeds = ", ".join(f"{v:.2f}" for v in rows[key])
            return f"{rows[key].mean():.2f} % ({seeds})"

        def t(rule: str) -> str:
            rows = sub[sub["rule"] == rule]["offline/t_star"].dropna()
            return f"{rows.iloc[0]:.4g}" if len(rows) else "-"

        viol = sub["test/ineq_viol_worst"].max()
        lines.append(
            f"| {label} | {t('margin')} | {t('cost')} | {cell('ldr', 'margin')} | {cell('ldr', 'cost')} | "
            f"{cell('proposed', 'margin')} | {cell('proposed', 'cost')} | {viol:.1e} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", help="results CSV with ldr and proposed rows under both rule objectives")
    print(table(pd.read_csv(parser.parse_args().csv)))


if __name__ == "__main__":
    main()
