"""A record's provenance: where and with what it was made (commit, versions, machine, sweep token).

A module of its own, without Hydra, because both a training run (:mod:`.runner`) and the re-evaluation of a saved
model (:mod:`.reevaluate`, which runs on the core install) write it into their records.
"""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path

SWEEP_TOKEN_ENV = "HARDLINEAR_SWEEP_TOKEN"
"""The environment variable holding the running sweep's token (set by :class:`hardlinear.harness.sweep.SweepProgress`)."""


_PROCESS_SHA: list[str] = []
"""The commit read by this process's first :func:`git_sha` call, kept for the rest of the process."""


def git_sha() -> str:
    """The checkout's commit, ``-dirty`` when tracked files other than ``results/`` differ from it; read once per
    process.

    Why once: a process runs the code it imported when it started, so a commit landing during a sweep must not
    relabel the sweep's later records (``hardlinear run`` reads it before Hydra starts). Why ``results/`` is left
    out: a sweep writes records under ``results/`` while it runs, which changes no code; counting it would mark
    every record after the first as dirty."""
    if not _PROCESS_SHA:
        _PROCESS_SHA.append(_read_git_sha())
    return _PROCESS_SHA[0]


def _read_git_sha() -> str:
    try:
        root = Path(__file__).resolve().parents[2]
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        sha = out.stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results"], cwd=root, capture_output=True, text=True, timeout=5)
        return (sha + ("-dirty" if dirty.stdout.strip() else "")) if sha else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_name(device: str) -> str:
    import torch  # here, not at the top: ``hardlinear run`` reads the commit before the thread pools are sized

    if str(device).startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return f"cpu:{platform.processor() or platform.machine()}"


def cpu_model() -> str:
    """The CPU's model name (Linux ``/proc/cpuinfo``, else ``platform.processor()``), for provenance records."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def sweep_token() -> str:
    """The token of the sweep this process (or its parent) is running; "" outside a sweep."""
    return os.environ.get(SWEEP_TOKEN_ENV, "")


def utc_now() -> str:
    """The time now, UTC, to the second (``2026-01-31T12:00:00Z``)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def provenance(device: str) -> dict:
    """Where and with what a record was made: commit, results version, package versions, machine."""
    import numpy
    import torch

    from hardlinear import __version__
    from hardlinear.harness.results import RESULTS_VERSION

    return {
        "git_sha": git_sha(), "results_version": RESULTS_VERSION, "hardlinear": __version__,
        "python": platform.python_version(), "torch": torch.__version__, "numpy": numpy.__version__,
        "host": platform.node(), "cpu": cpu_model(), "device": device_name(device), "timestamp": utc_now(),
        "sweep_token": sweep_token(),  # which sweep wrote it: a sweep's summary counts only its own records
    }
