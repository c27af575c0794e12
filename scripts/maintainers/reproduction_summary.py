"""The reproduction's summary: per problem, the proposed method's gap, worst violations and latency beside the
paper's, from the results CSV (Markdown on stdout; docs/reproduction.md quotes it).

    python scripts/maintainers/reproduction_summary.py --results results/paper/runs.csv
    python scripts/maintainers/reproduction_summary.py --baselines     # every paper row: ours beside it, > 1 point worse flagged
"""

import argparse
import sys

from hardlinear.harness import results
from hardlinear.reporting import paper_reference as paper

# (problem, objective, our experiment, the paper's table)
BLOCKS = [
    ("portfolio", "lp", "table_qp_main", "dcopt_qp"),
    ("dcopf_118", "qp", "table_qp_main", "dcopt_qp"),
    ("dcopf_200", "qp", "table_qp_main", "dcopt_qp"),
    ("dcopf_14", "lp", "table_lp", "dcopt_lp"),
    ("dcopf_30", "lp", "table_lp", "dcopt_lp"),
    ("dcopf_57", "lp", "table_lp", "dcopt_lp"),
    ("dcopf_118", "lp", "table_lp", "dcopt_lp"),
    ("dcopf_200", "lp", "table_lp", "dcopt_lp"),
    ("dcopf_14", "qp", "table_qp_add", "dcopt_qp_add"),
    ("dcopf_30", "qp", "table_qp_add", "dcopt_qp_add"),
    ("dcopf_57", "qp", "table_qp_add", "dcopt_qp_add"),
]


def _paper_number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return float("nan")


def baselines(df) -> None:
    """Every row of the paper's result tables beside ours (mean over seeds; worst = mean of each seed's worst),
    flagging a gap more than 1 point above the paper's or an inequality violation above the paper's by 0.01
    (the paper's rounding is 3 decimals), and seeds whose gaps disagree (``stats.seed_gaps_disagree``)."""
    from hardlinear.reporting.paper_tables import PAPER_LABELS, PENALTY_EXPERIMENT, TABLES
    from hardlinear.reporting.stats import of_key, one_per_seed, seed_gaps_disagree, with_keys

    print("| table | problem | method | seeds | gap % (ours) | gap % (paper) | ineq. viol. (ours) | ineq. viol. (paper) | iterations (ours / paper) | flag |")
    print("|---|---|---|--:|--:|--:|--:|--:|--:|---|")
    ok = df[df["status"].isin(["ok", ""]) & (df["experiment"] != PENALTY_EXPERIMENT)]
    keyed = with_keys(ok)
    for name, spec in TABLES.items():
        if not spec.paper or spec.label_as_paper:
            continue
        for row in paper.paper_table(spec.paper):
            sub = keyed[keyed["problem"] == row.problem]
            if row.problem != "portfolio":
                sub = sub[sub["objective"] == row.objective]
            runs = one_per_seed(of_key(sub, PAPER_LABELS[row.method]), name)
            if not len(runs):
                print(f"| {name} | {row.problem} | {row.method} | 0 | not run | {row.gap_mean} ({row.gap_worst}) | | "
                      f"{row.ineq_viol_mean} ({row.ineq_viol_worst}) | | |")
                continue
            gap, gap_w = runs["test/gap_mean"].mean(), runs["test/gap_worst"].mean()
            ineq, ineq_w = runs["test/ineq_viol_mean"].mean(), runs["test/ineq_viol_worst"].mean()
            flags = []
            if gap > _paper_number(row.gap_mean) + 1.0:
                flags.append("gap worse by > 1 point")
            if ineq > _paper_number(row.ineq_viol_mean) + 0.01:
                flags.append("less feasible")
            if seed_gaps_disagree(list(runs["test/gap_mean"])):
                flags.append("seeds disagree: " + " / ".join(f"{g:.2f}" for g in runs["test/gap_mean"]))
            its = f"{runs['test/iterations'].mean():.0f} / {row.iterations or '-'}"
            print(f"| {name} | {row.problem} | {row.method} | {len(runs)} | {gap:.2f} ({gap_w:.2f}) | {row.gap_mean} ({row.gap_worst}) "
                  f"| {ineq:.3f} ({ineq_w:.3f}) | {row.ineq_viol_mean} ({row.ineq_viol_worst}) | {its} | {'; '.join(flags)} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", nargs="+", default=["results/paper/runs.csv", "results"], help="results roots (record dirs, legacy CSVs)")
    parser.add_argument("--study", default="paper")
    parser.add_argument("--baselines", action="store_true", help="every paper row, not only the proposed method's")
    args = parser.parse_args()
    df = results.load_records(args.results, study=args.study)
    df = df[df["status"].isin(["ok", ""])]
    if args.baselines:
        baselines(df)
        return 0
    print("| problem | objective | seeds | gap % (ours) | gap % (paper) | worst eq. / ineq. viol. (ours) "
          "| ms at batch 1 (ours) | ms (paper) |")
    print("|---|---|--:|--:|--:|--:|--:|--:|")
    for problem, objective, experiment, table in BLOCKS:
        ours = df[(df["problem"] == problem) & (df["objective"] == objective) & (df["method"] == "proposed")
                  & (df["pretrain_epochs"] > 0)]
        preferred = ours[ours["experiment"] == experiment]
        ours = (preferred if len(preferred) else ours).drop_duplicates("seed", keep="last")
        ref = [r for r in paper.paper_block(table, problem) if r.method == "Proposed"]
        p_gap = f"{ref[0].gap_mean} ({ref[0].gap_worst})" if ref else "-"
        p_ms = ref[0].time_ms if ref else "-"
        if not len(ours):
            print(f"| {problem} | {objective} | 0 | not run | {p_gap} | not run | not run | {p_ms} |")
            continue
        gap = f"{ours['test/gap_mean'].mean():.2f} ({ours['test/gap_worst'].max():.2f})"
        viol = f"{ours['test/eq_viol_worst'].max():.1e} / {ours['test/ineq_viol_worst'].max():.1e}"
        print(f"| {problem} | {objective} | {len(ours)} | {gap} | {p_gap} | {viol} | "
              f"{ours['test/time_ms'].median():.2f} | {p_ms} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
