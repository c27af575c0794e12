"""The last training state of a run (``last.pt``) beside its best checkpoint (``checkpoint.pt``), and resuming.

``checkpoint.pt`` (``harness.checkpoint``) is the kept model: the epoch with the lowest validation loss, the one the
run evaluates and ``load_run`` reloads. ``last.pt`` is where training stood after its latest saved epoch (every
``trainer.val_every`` epochs and after the last): the method's tensors, Adam's moments, the sampling generator,
the best state kept so far, the epoch and the history, so that ``trainer.resume=<run_dir>`` goes on exactly where
that run stopped (a kill, Ctrl-C, a cluster's time limit, or more epochs wanted), as lightning-hydra-template's
``ckpt_path`` does. Written atomically like every record; loaded with ``weights_only=True`` (plain types and
tensors only, nothing unpickled).
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import torch

from hardlinear.runtime.atomic import atomic_write_bytes

LAST_NAME = "last.pt"
FORMAT = "hardlinear-last/1"
MATCHING_KEYS = ("problem", "method", "content", "network", "dtype")
"""Config sections a resumed run must share with the run it resumes: the same problem (and file content), the
same method and network, the same dtype. The trainer's settings may differ (more epochs is the usual reason)."""


def last_path(run_dir: str | os.PathLike) -> Path:
    return Path(run_dir) / LAST_NAME


def save_last(run_dir: str | os.PathLike, state: dict[str, Any], config: dict[str, Any]) -> Path:
    """Write ``<run_dir>/last.pt``: the trainer's ``training_state`` and the run's resolved config."""
    buf = io.BytesIO()
    torch.save({"format": FORMAT, "state": state, "config": json.loads(json.dumps(config, default=str))}, buf)
    return atomic_write_bytes(last_path(run_dir), buf.getvalue(), durable=True)


def resume_problem(run_dir: str | os.PathLike) -> str | None:
    """Why ``trainer.resume=<run_dir>`` cannot be used (checked before any work), or None."""
    path = last_path(run_dir)
    if not Path(run_dir).is_dir():
        return f"trainer.resume={run_dir}: no such run directory"
    if not path.is_file():
        return (f"trainer.resume={run_dir}: no {LAST_NAME} there (runs save it every trainer.val_every epochs; runs "
                "made before it existed, and methods without training, have none)")
    return None


def read_last(run_dir: str | os.PathLike, config: dict[str, Any]) -> dict[str, Any]:
    """The training state saved in ``<run_dir>/last.pt``, after checking that it belongs to a run of the same
    problem, method and network as ``config``; ``ValueError`` naming what differs otherwise."""
    problem = resume_problem(run_dir)
    if problem:
        raise ValueError(problem)
    path = last_path(run_dir)
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unpickling failure means the same thing
        raise ValueError(f"{path} cannot be read ({type(err).__name__}: {err})") from err
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{path} is not a hardlinear training state ({FORMAT})")
    saved = payload["config"]
    differ = [k for k in MATCHING_KEYS if json.dumps(saved.get(k), sort_keys=True, default=str) != json.dumps(config.get(k), sort_keys=True, default=str)]
    if differ:
        raise ValueError(f"trainer.resume={run_dir}: that run differs from this one in {', '.join(differ)}; "
                         "resume continues the same problem, method and network (only trainer settings may change)")
    return payload["state"]
