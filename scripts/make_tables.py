"""The paper's five tables from the results CSV, ours beside the paper's figures (Markdown and LaTeX).

    python scripts/make_tables.py --results results/runs.csv --out results/tables
"""

import argparse
import sys

from hardlinear.reporting.tables import make_tables


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default="results/runs.csv", help="results CSV (default: results/runs.csv)")
    parser.add_argument("--out", default="results/tables", help="output folder (default: results/tables)")
    parser.add_argument("--skipped", default=None, help="skipped-runs CSV (default: <results stem>.skipped.csv)")
    args = parser.parse_args()
    try:
        written = make_tables(args.results, args.out, skipped_csv=args.skipped)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    for path in written.values():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
