"""A study in the browser: ``results/reports/<study>/index.html``, self-contained (the study table, sortable, with
infeasible rows marked; the figures embedded; every run's status, reason, config and W&B run).

    python scripts/make_report.py --study smoke                    # -> results/reports/smoke/index.html
    python scripts/make_report.py                                  # every study, each in its own folder
    python scripts/make_report.py --study smoke --out /tmp/reports --results results/runs

Same selection as make_tables.py (``--results``, ``--study``, ``--where``). Open the page with any browser; it
fetches nothing.
"""

import argparse
import sys
from pathlib import Path

import _select

from hardlinear.reporting.html_report import write_report
from hardlinear.reporting.study_table import default_settings
from hardlinear.reporting.tables import MixedSettings

CONF = Path(__file__).resolve().parents[1] / "conf"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _select.add_arguments(parser)
    parser.add_argument("--out", default="results/reports", help="output folder; one sub-folder per study (default: results/reports)")
    args = parser.parse_args()
    try:
        df, studies = _select.load(args)
    except (FileNotFoundError, LookupError, KeyError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    failed = 0
    defaults = default_settings(CONF)
    for study in studies:
        try:
            path = write_report(df, Path(args.out) / study, study, defaults)
        except (MixedSettings, LookupError) as err:
            print(f"error: study {study}: {err}", file=sys.stderr)
            failed += 1
            continue
        print(f"study {study}: {path} (open it in a browser: file://{path.resolve()})")
    if not studies:
        print(f"no runs in {' '.join(args.results)}{' matching ' + ' '.join(args.where) if args.where else ''}", file=sys.stderr)
    return 1 if failed or not studies else 0


if __name__ == "__main__":
    sys.exit(main())
