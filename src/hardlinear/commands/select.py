"""Command-line selection shared by ``tables``, ``figures``, ``report`` (and ``scripts/aggregate.py``): results roots,
a study, filters on config keys."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from hardlinear.harness import results
from hardlinear.runtime.extras import check_installed

REPORTING_PACKAGES = ("pandas", "omegaconf", "matplotlib")
"""What tables, figures and reports import (the ``harness`` extra brings them)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--results", nargs="+", default=list(results.DEFAULT_ROOTS),
        help="results roots: directories of run records and/or legacy results CSVs (default: %(default)s)",
    )
    parser.add_argument("--study", default=None, help="one study (default: every study, each on its own)")
    parser.add_argument(
        "--where", nargs="*", default=[], metavar="KEY=VALUE",
        help="keep runs whose column or config key equals the value, e.g. trainer.name=fast seed=0",
    )


def load(args: argparse.Namespace):
    """The results table of ``args`` (study and filters applied) and the studies to render;
    :class:`~hardlinear.runtime.extras.MissingExtra` naming the extra on a core install."""
    check_installed(REPORTING_PACKAGES, extra="harness", purpose="tables, figures and reports")
    if args.study is not None:
        results.check_study_name(args.study, "--study")  # it names the output folder: before any reading
    df = results.report_table(args.results, where=results.parse_where(args.where))
    present = [s for s in results.studies(df) if results.study_name_problem(s) is None]  # the loader skips the rest
    if args.study is not None and args.study not in present:
        raise LookupError(f"no runs of study {args.study!r} in {' '.join(args.results)}; studies present: {', '.join(present) or 'none'}")
    return df, ([args.study] if args.study is not None else present)


def for_each_study(args: argparse.Namespace, write: Callable, errors: tuple[type[Exception], ...]) -> int:
    """What ``tables``, ``figures`` and ``report`` share: load the selection, then ``write(df, study, folder)`` for each
    study (it returns what to print after ``study <name>:``); a study that raises one of ``errors`` is one error
    line and the others go on. The exit code: 1 when a study failed, the selection could not load, or it holds none."""
    try:
        df, studies = load(args)
    except (FileNotFoundError, LookupError, KeyError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    failed = 0
    for study in studies:
        try:
            line = write(df, study, Path(args.out) / study)
        except errors as err:
            print(f"error: study {study}: {err}", file=sys.stderr)
            failed += 1
            continue
        print(f"study {study}: {line}")
    if not studies:
        print(f"no runs in {' '.join(args.results)}{' matching ' + ' '.join(args.where) if args.where else ''}", file=sys.stderr)
    return 1 if failed or not studies else 0
