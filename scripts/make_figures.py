"""Figures from the results CSV: gap against time and violations per method, per problem (PNG and PDF).

    python scripts/make_figures.py --results results/runs.csv --out results/figures
"""

import argparse
import sys

from hardlinear.reporting.figures import make_figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default="results/runs.csv", help="results CSV (default: results/runs.csv)")
    parser.add_argument("--out", default="results/figures", help="output folder (default: results/figures)")
    args = parser.parse_args()
    try:
        written = make_figures(args.results, args.out)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
