"""The reproduction's summary: per problem, the proposed method's gap, worst violations and latency beside the
paper's, from the results CSV (Markdown on stdout; docs/reproduction.md quotes it).

    python scripts/reproduction_summary.py --results results/paper/runs.csv
"""

import argparse
import sys

from hardlinear import results
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default="results/paper/runs.csv")
    args = parser.parse_args()
    df = results.load_results(args.results)
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
