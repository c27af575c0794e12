"""Command-line selection shared by ``tables``, ``figures``, ``report`` (and ``scripts/aggregate.py``): results roots,
a study, filters on config keys."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from hardlinear.harness import results
from hardlinear.runtime.extras import check_installed
from hardlinear.runtime.names import printable

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


def out_folder_problem(out: str | Path) -> str | None:
    """Why ``--out`` cannot hold the output folders, or None: it must be (or become) a writable folder. Checked before
    any reading, so ``--out /dev/null``, a file or ``/proc`` is one line, not a ``mkdir`` traceback after the work."""
    path = Path(out)
    if path.exists() and not path.is_dir():
        return f"--out {out} is a file, not a folder; name a folder (it is created if missing)"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        return f"--out {out} cannot be created ({err.strerror or type(err).__name__}); name a folder you can write"
    probe = path / f".write-check-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as err:
        return f"--out {out} cannot be written ({err.strerror or type(err).__name__}); name a folder you can write"
    return None


def _stop_on_term(signum, frame) -> None:  # noqa: ARG001 - the signal handler's signature
    raise SystemExit(128 + signum)  # unwinds like Ctrl-C: temporary folders are removed on the way out


def for_each_study(args: argparse.Namespace, write: Callable, errors: tuple[type[Exception], ...]) -> int:
    """What ``tables``, ``figures`` and ``report`` share: load the selection, then ``write(df, study, folder)`` for each
    study (it returns what to print after ``study <name>:``); a study that raises one of ``errors`` (or an
    ``OSError`` writing its files) is one error line and the others go on. The exit code: 1 when a study failed,
    the selection could not load, or it holds none. A SIGTERM (``kill``, ``make`` interrupted) unwinds as Ctrl-C
    does, so no temporary file is left behind."""
    try:  # a bad --study names the folder the check below would create: refused first
        if args.study is not None:
            results.check_study_name(args.study, "--study")
    except ValueError as err:
        print(f"error: {printable(err)}", file=sys.stderr)
        return 1
    problem = out_folder_problem(args.out)
    if problem:
        print(f"error: {printable(problem)}", file=sys.stderr)
        return 1
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stop_on_term)
    try:
        df, studies = load(args)
    except (FileNotFoundError, LookupError, KeyError, ValueError) as err:
        print(f"error: {printable(err)}", file=sys.stderr)
        return 1
    failed = 0
    for study in studies:
        try:
            line = write(df, study, Path(args.out) / study)
        except (*errors, OSError) as err:
            print(f"error: study {printable(study)}: {printable(err)}", file=sys.stderr)
            failed += 1
            continue
        print(f"study {printable(study)}: {printable(line)}")
    if not studies:
        print(f"no runs in {' '.join(args.results)}{' matching ' + ' '.join(args.where) if args.where else ''}", file=sys.stderr)
    return 1 if failed or not studies else 0
