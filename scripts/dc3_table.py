"""Our runs on DC3's benchmark beside DC3's published figures (Markdown).

    python scripts/dc3_table.py --results results/dc3/runs.csv --out results/dc3/table.md
"""

import argparse
import sys
from pathlib import Path

import pandas as pd

from hardlinear.reporting.dc3_reference import dc3_table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default="results/dc3/runs.csv", help="results CSV (default: results/dc3/runs.csv)")
    parser.add_argument("--out", default="results/dc3/table.md", help="Markdown file to write")
    args = parser.parse_args()
    if not Path(args.results).is_file():
        print(f"error: no results CSV at {args.results}; run python run.py +experiment=table_dc3_qp first", file=sys.stderr)
        return 1
    text = dc3_table(pd.read_csv(args.results))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
