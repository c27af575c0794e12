"""Before Hydra writes anything: the run's (or sweep's) output folder must be a folder this process can write,
on a file system with room for a run's small files. Registered as a Hydra callback in ``conf/config.yaml``.

Why a callback: Hydra creates the output folder and writes ``.hydra/*.yaml`` before the task function runs, so a
``hydra.run.dir`` that is a file, or a full disk, would otherwise end in Hydra's own traceback. ``on_run_start`` and
``on_multirun_start`` run before those writes; a problem ends the process with one line naming the path and the fix.
Later writes on a disk that fills up mid-run are :class:`hardlinear.runtime.atomic.DiskFull` with the bytes each needed.
"""

from __future__ import annotations

# ruff: noqa: E402 - the imports after require_extra() need the harness extra
import sys
from typing import Any

from hardlinear.harness import require_extra

require_extra()  # before Hydra's imports: a core install gets the pip line, not ModuleNotFoundError

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from hardlinear.harness.schemas import output_path_problem
from hardlinear.runtime.atomic import _size, free_bytes

MIN_FREE_BYTES = 1 * 2**20
"""Space a run needs before it starts: Hydra's config files, ``config.json``, the record and ``metrics.json`` (tens
of kB; a checkpoint comes on top and is checked when written)."""


def output_folder_problem(key: str, path: str) -> str | None:
    """One line saying why ``path`` (the value of ``key``) cannot take a run's outputs, or None."""
    unusable = output_path_problem(path, "folder")
    if unusable:
        return f"{key}={path!r} {unusable}"
    free = free_bytes(path)
    if free is not None and free < MIN_FREE_BYTES:
        return (
            f"no space to start a run in {path}: it needs at least {_size(MIN_FREE_BYTES)} free, {_size(free)} free; "
            f"free some space or set {key}=<a folder on another disk>"
        )
    return None


def _stop(message: str) -> None:
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(1)  # SystemExit passes through Hydra's error report: one line, no traceback


class OutputPreflight(Callback):
    """Checks ``hydra.run.dir`` (single runs) or ``hydra.sweep.dir`` (sweeps) before Hydra writes into it."""

    def on_run_start(self, config: DictConfig, **_: Any) -> None:
        problem = output_folder_problem("hydra.run.dir", str(config.hydra.run.dir))
        if problem:
            _stop(problem)

    def on_multirun_start(self, config: DictConfig, **_: Any) -> None:
        problem = output_folder_problem("hydra.sweep.dir", str(config.hydra.sweep.dir))
        if problem:
            _stop(problem)
