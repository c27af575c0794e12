"""Figures per study: gap against time, violations per method and training curves per problem (PNG and PDF),
with the paper's figures as reference markers and a captions.md.

    python scripts/make_figures.py                   # every study -> results/figures/<study>/
    python scripts/make_figures.py --study paper --out results/paper/figures-check

Same selection as make_tables.py (``--results``, ``--study``, ``--where``).
"""

import argparse
import sys
from pathlib import Path

import _select

from hardlinear.reporting.figures import FORMATS, make_figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _select.add_arguments(parser)
    parser.add_argument("--out", default="results/figures", help="output folder; one sub-folder per study (default: results/figures)")
    parser.add_argument("--formats", nargs="+", default=list(FORMATS), help="file formats (default: png pdf)")
    args = parser.parse_args()
    try:
        df, studies = _select.load(args)
    except (FileNotFoundError, LookupError, KeyError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    failed = 0
    for study in studies:
        try:
            written = make_figures(df, Path(args.out) / study, study=study, formats=tuple(args.formats))
        except ValueError as err:  # MixedSettings (a cell mixing settings), or no ok run to draw
            print(f"error: study {study}: {err}", file=sys.stderr)
            failed += 1
            continue
        print(f"study {study}: {len(written)} files in {Path(args.out) / study}")
    return 1 if failed or not studies else 0


if __name__ == "__main__":
    sys.exit(main())
