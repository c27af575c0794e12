"""Our runs on DC3's benchmark beside DC3's published figures (Markdown).

    python scripts/maintainers/dc3_table.py                       # records under results/ and results/dc3/runs.csv
    python scripts/maintainers/dc3_table.py --results results/multirun/2026... --out my_table.md

Reads every ``record.json`` under the given directories and legacy results CSVs (``results/dc3/runs.csv``
holds the runs of issue 18, made before records existed), keeps the problems named ``dc3_*`` with status
``ok``, and writes one table with DC3's published rows (``hardlinear/reporting/data/dc3_reference.csv``).
"""

import argparse
import sys
from pathlib import Path

from hardlinear.harness.results import load_records
from hardlinear.reporting.dc3_reference import dc3_table

DEFAULT_ROOTS = ("results", "results/dc3/runs.csv")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", nargs="+", default=list(DEFAULT_ROOTS), help="record folders and legacy CSVs")
    parser.add_argument("--out", default="results/dc3/table.md", help="Markdown file to write")
    args = parser.parse_args()
    roots = [r for r in args.results if Path(r).exists()]
    if not roots:
        print(f"error: none of {args.results} exists; run python run.py -m +experiment=table_dc3_qp first", file=sys.stderr)
        return 1
    df = load_records(roots, quiet=True)
    df = df[(df["status"].astype(str) == "ok") & df["problem"].astype(str).str.startswith("dc3_")]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(dc3_table(df))
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
