"""Merge results CSVs (several machines, resumed sweeps) into one tidy CSV; a run recorded twice (same
config_hash) is kept once, the newest.

    python scripts/aggregate.py --inputs results/runs.csv other.csv --out results/aggregated.csv
"""

import argparse
import sys

from hardlinear.results import aggregate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", nargs="+", required=True, help="results CSVs to merge")
    parser.add_argument("--out", required=True, help="merged CSV to write")
    args = parser.parse_args()
    try:
        merged = aggregate(args.inputs, args.out)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"{len(merged)} runs from {len(args.inputs)} file(s) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
