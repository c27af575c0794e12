"""A table for every study (``study.md``, ``.tex``, ``.csv``: methods x problems, every run with its status), and
the paper's five tables, ours beside the paper's figures, for a study that ran the paper's problems.

    hardlinear tables                                   # every study -> results/tables/<study>/
    hardlinear tables --study smoke                     # one study
    hardlinear tables --study default --where trainer.name=fast

(``python scripts/make_tables.py`` in a checkout.) The runs come from the records under the results roots
(``--results``; default: ``results`` and the committed paper study ``results/paper/runs.csv``). A table cell whose
runs differ in a setting other than the seed is refused with the keys named: select with ``--study`` / ``--where``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    from hardlinear.commands import CONF, select
    from hardlinear.reporting.study_table import default_settings, write_study_table
    from hardlinear.reporting.tables import MixedSettings, make_tables

    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    select.add_arguments(parser)
    parser.add_argument("--out", default="results/tables", help="output folder; one sub-folder per study (default: results/tables)")
    args = parser.parse_args(argv)
    defaults = default_settings(CONF)

    def write(df, study: str, folder: Path) -> str:
        written = write_study_table(df[df["study"] == study], folder, study, defaults)
        written.update(make_tables(df, folder, study=study))
        paper = sorted(n for n in written if not n.startswith("study."))
        return f"study.md, .tex, .csv{' and the paper layout (' + str(len(paper)) + ' files)' if paper else ''} in {folder}"

    return select.for_each_study(args, write, (MixedSettings,))
