"""Paths, seeds and threads: what the machine must allow. The output folders must be writable, the seeds fit
a 64-bit generator, the threads within what the process may start, and more threads than the cores this process
may use only warn."""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path

from hardlinear.harness.results import study_name_problem
from hardlinear.harness.schemas.checker import _Checker
from hardlinear.harness.schemas.hints import _is_number
from hardlinear.harness.schemas.tables import MAX_THREADS, SEED_LIMIT


def _check_paths_and_threads(check: _Checker, data: dict) -> None:
    _check_seeds_and_names(check, data)
    for key, example in (("results_dir", "results"), ("cache_dir", "data/cache")):
        value = data.get(key)
        if isinstance(value, str):
            problem = output_path_problem(value, "folder", example)
            if problem:
                check.error(f"{key}={value!r} {problem}")
    _warn_threads(data.get("threads"))


def _check_seeds_and_names(check: _Checker, data: dict) -> None:
    """Seeds that fit a 64-bit generator; study and experiment names of one path component; threads the process
    may start (:func:`hardlinear.runtime.threads.threads_beyond_room`)."""
    from hardlinear.runtime.threads import threads_beyond_room

    if _is_number(data.get("threads")) and 1 <= data["threads"] <= MAX_THREADS:
        problem = threads_beyond_room(int(data["threads"]))
        if problem:
            check.error(problem)
    for key in ("seed",):
        value = data.get(key)
        if _is_number(value) and value >= SEED_LIMIT:
            check.error(f"{key} must be < 2**63 (a 64-bit generator seed); got {value}")
    test_seed = (data.get("data") or {}).get("test_seed") if isinstance(data.get("data"), dict) else None
    if _is_number(test_seed) and test_seed >= SEED_LIMIT:
        check.error(f"data.test_seed must be < 2**63 (a 64-bit generator seed); got {test_seed}")
    for key in ("study", "experiment"):  # a study names a folder of tables and figures: one path component
        value = data.get(key)
        if isinstance(value, str) and (key == "study" or value):
            problem = study_name_problem(value)
            if problem:
                check.error(f"{key}={value!r} {problem}".replace("e.g. study=", f"e.g. {key}="))


def _warn_threads(threads: object) -> None:
    """More threads than cores runs, slower: a warning (the hard bound is ``tables.MAX_THREADS``)."""
    from hardlinear.runtime.threads import threads_beyond_room

    cores = available_cores()
    if _is_number(threads) and cores < threads <= MAX_THREADS and not threads_beyond_room(int(threads)):
        # beyond MAX_THREADS or what may start: an error, not a warning too
        warnings.warn(
            f"threads={threads} but only {cores} cores are available to this process: the threads will share them "
            f"and run slower; set threads={cores} or fewer",
            stacklevel=4,
        )


def available_cores() -> int:
    """Cores this process may run on (its affinity: what SLURM or taskset grants), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def output_path_problem(path: str, kind: str = "file", example: str | None = None) -> str | None:
    """Why ``path`` cannot be written as a ``kind`` ("file" or "folder"), or None when it can.

    Checked by creating (and deleting) a temporary file in the path's folder, or in its nearest existing
    ancestor when the folder does not exist yet: permissions, read-only mounts and a file in the way all show.
    """
    if not path.strip():
        example = example or ("results/runs.csv" if kind == "file" else "data/cache")
        return f"is empty; give a {kind} path such as {example}"
    target = Path(path).expanduser()
    if kind == "file":
        if target.is_dir():
            return f"is a folder; give a file inside it, e.g. {target / 'runs.csv'}"
        if target.exists() and not os.access(target, os.W_OK):
            return "exists and is not writable; choose another path or fix its permissions"
        folder = target.parent
    else:
        if target.exists() and not target.is_dir():
            return "is a file, not a folder; give a folder path"
        folder = target
    ancestor = folder
    while not ancestor.exists():
        if ancestor.parent == ancestor:
            break
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"cannot be created: {ancestor} is a file, not a folder; choose another path"
    try:
        with tempfile.TemporaryFile(dir=ancestor):
            pass
    except OSError as err:
        return f"cannot be written ({ancestor}: {err.strerror or err}); choose a writable path"
    return None
