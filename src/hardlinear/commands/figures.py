"""Figures per study: gap against time, violations per method and training curves per problem (PNG and PDF),
with the paper's figures as reference markers and a captions.md.

    hardlinear figures                                  # every study -> results/figures/<study>/
    hardlinear figures --study paper --out results/paper/figures-check

(``python scripts/make_figures.py`` in a checkout.) Same selection as ``hardlinear tables`` (``--results``,
``--study``, ``--where``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    from hardlinear.commands import select
    from hardlinear.reporting.figures import FORMATS, make_figures

    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    select.add_arguments(parser)
    parser.add_argument("--out", default="results/figures", help="output folder; one sub-folder per study (default: results/figures)")
    parser.add_argument("--formats", nargs="+", default=list(FORMATS), help="file formats (default: png pdf)")
    args = parser.parse_args(argv)

    def write(df, study: str, folder: Path) -> str:
        written = make_figures(df, folder, study=study, formats=tuple(args.formats))
        return f"{len(written)} files in {folder}"

    # ValueError: MixedSettings (a cell mixing settings), or no ok run to draw
    return select.for_each_study(args, write, (ValueError,))
