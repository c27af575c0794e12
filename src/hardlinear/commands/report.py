"""A study in the browser: ``results/reports/<study>/index.html``, self-contained (the study table, sortable, with
infeasible rows marked; the figures embedded; every run's status, reason, config and W&B run).

    hardlinear report --study smoke                     # -> results/reports/smoke/index.html
    hardlinear report                                   # every study, each in its own folder
    hardlinear report --study smoke --out /tmp/reports --results results/runs

(``python scripts/make_report.py`` in a checkout.) Same selection as ``hardlinear tables`` (``--results``,
``--study``, ``--where``). Open the page with any browser; it fetches nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    from hardlinear.commands import CONF, select
    from hardlinear.reporting.html_report import write_report
    from hardlinear.reporting.study_table import default_settings
    from hardlinear.reporting.tables import MixedSettings

    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    select.add_arguments(parser)
    parser.add_argument("--out", default="results/reports", help="output folder; one sub-folder per study (default: results/reports)")
    args = parser.parse_args(argv)
    defaults = default_settings(CONF)

    def write(df, study: str, folder: Path) -> str:
        path = write_report(df, folder, study, defaults)
        return f"{path} (open it in a browser: file://{path.resolve()})"

    return select.for_each_study(args, write, (MixedSettings, LookupError))
