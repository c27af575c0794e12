"""The paper's five tables per study, ours beside the paper's figures (Markdown and LaTeX).

    python scripts/make_tables.py                              # every study -> results/tables/<study>/
    python scripts/make_tables.py --study smoke                # one study
    python scripts/make_tables.py --study default --where trainer.name=fast

The runs come from the records under the results roots (``--results``; default: ``results`` and the committed
paper study ``results/paper/runs.csv``). A table cell whose runs differ in a setting other than the seed is
refused with the keys named: select with ``--study`` / ``--where``.
"""

import argparse
import sys
from pathlib import Path

import _select

from hardlinear.reporting.tables import MixedSettings, make_tables


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _select.add_arguments(parser)
    parser.add_argument("--out", default="results/tables", help="output folder; one sub-folder per study (default: results/tables)")
    args = parser.parse_args()
    try:
        df, studies = _select.load(args)
    except (FileNotFoundError, LookupError, KeyError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    failed = 0
    for study in studies:
        try:
            written = make_tables(df, Path(args.out) / study, study=study)
        except MixedSettings as err:
            print(f"error: study {study}: {err}", file=sys.stderr)
            failed += 1
            continue
        if written:
            print(f"study {study}: {len(written)} files in {Path(args.out) / study}")
        else:
            print(f"study {study}: none of the paper's problems; its own table comes from its script "
                  "(scripts/dc3_table.py, scripts/peers_table.py, scripts/cost_rule_table.py)")
    if not studies:
        print(f"no runs in {' '.join(args.results)}{' matching ' + ' '.join(args.where) if args.where else ''}", file=sys.stderr)
    return 1 if failed or not studies else 0


if __name__ == "__main__":
    sys.exit(main())
