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
import math
import os
from pathlib import Path
from typing import Any

import torch

from hardlinear.runtime.atomic import atomic_write_bytes

LAST_NAME = "last.pt"
FORMAT = "hardlinear-last/1"
MATCHING_KEYS = ("seed", "problem", "method", "content", "network", "dtype", "data")
"""Config sections a resumed run must share with the run it resumes: the same seed, problem (and file content),
method (with its options), network, dtype and data. The trainer's settings may differ (more epochs is the usual
reason). ``seed=5 trainer.resume=<a seed-0 run>`` recorded seed 5's run made of seed 0's training before."""
MAX_EPOCH = 10**7
"""Largest epoch a saved state may claim (``trainer.epochs`` is far below)."""


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
    saved = payload.get("config")
    if not isinstance(saved, dict):
        raise ValueError(f"{path} holds no run config; it is not a training state this version wrote")
    differ = [_difference(k, saved.get(k), config.get(k)) for k in MATCHING_KEYS
              if json.dumps(saved.get(k), sort_keys=True, default=str) != json.dumps(config.get(k), sort_keys=True, default=str)]
    if differ:
        raise ValueError(f"trainer.resume={run_dir}: that run differs from this one in {'; '.join(differ)}; resume "
                         "continues the same seed, problem, method (and options), network and data (only trainer "
                         "settings may change): resume the run with these settings, or drop trainer.resume")
    wrong = state_problems(payload.get("state"))
    if wrong:
        raise ValueError(f"trainer.resume={run_dir}: {path} holds an impossible training state ({'; '.join(wrong)}); "
                         "it was edited or damaged: resume from another run, or drop trainer.resume")
    return payload["state"]


def _difference(key: str, there: Any, here: Any) -> str:
    """``seed 0 there, 5 here``; for a section, its first differing keys."""
    if isinstance(there, dict) and isinstance(here, dict):
        keys = sorted(k for k in set(there) | set(here) if json.dumps(there.get(k), sort_keys=True, default=str)
                      != json.dumps(here.get(k), sort_keys=True, default=str))
        shown = [f"{key}.{k} {_short(there.get(k))} there, {_short(here.get(k))} here" for k in keys[:3]]
        return ", ".join(shown) + (f" (and {len(keys) - 3} more)" if len(keys) > 3 else "")
    return f"{key} {_short(there)} there, {_short(here)} here"


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def state_problems(state: Any) -> list[str]:
    """What is out of range in a saved ``training_state`` (``[]`` when it is one the trainer could have written):
    an epoch below 0 ran 14 epochs of 8 before."""
    if not isinstance(state, dict):
        return [f"the state is a {type(state).__name__}, not a mapping"]
    out = []
    need = {"epoch": int, "best_epoch": int, "best_val_loss": float, "epochs_done": float, "time_s": float,
            "history": list, "method": dict, "optimizer": dict}
    for key, kind in need.items():
        value = state.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else kind):
            out.append(f"{key} is {type(value).__name__}, not {kind.__name__}")
    if out:
        return out
    epoch, best = state["epoch"], state["best_epoch"]
    if not 0 <= epoch < MAX_EPOCH:
        out.append(f"epoch={epoch} (a saved state is after an epoch >= 0)")
    if not -1 <= best <= epoch:
        out.append(f"best_epoch={best} outside [-1, epoch={epoch}]")
    if not (math.isfinite(state["epochs_done"]) and 0 <= state["epochs_done"] <= epoch + 1):
        out.append(f"epochs_done={state['epochs_done']} outside [0, epoch + 1 = {epoch + 1}]")
    if not (math.isfinite(state["time_s"]) and state["time_s"] >= 0):
        out.append(f"time_s={state['time_s']} is not a non-negative number of seconds")
    if math.isnan(state["best_val_loss"]):
        out.append("best_val_loss is NaN")
    return out
