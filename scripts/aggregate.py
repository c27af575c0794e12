"""The derived results table as one tidy CSV (one row per run, identity and config columns on every row),
rebuilt from the records at any time; the same records give the same bytes.

    python scripts/aggregate.py --out results/aggregated.csv
    python scripts/aggregate.py --results results /mnt/cluster/results --study smoke --out smoke.csv
"""

import argparse
import sys

import _select

from hardlinear.harness.results import aggregate, parse_where


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _select.add_arguments(parser)
    parser.add_argument("--out", required=True, help="CSV to write")
    args = parser.parse_args()
    try:
        merged = aggregate(args.results, args.out, study=args.study, where=parse_where(args.where))
    except (FileNotFoundError, KeyError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"{len(merged)} runs from {' '.join(args.results)} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
