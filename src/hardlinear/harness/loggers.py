"""Per-run loggers with one interface: a CSV log that is always on, and W&B when asked.

Methods: ``log_config(dict)``, ``log_epoch(epoch, metrics)``, ``log_final(metrics)``, ``log_table(name, df)``,
``log_checkpoint(path, metadata)``, ``log_status(status)`` (status, reason and identity: the W&B summary), ``finish()``. Metric keys are the project's ``split/metric`` names, unchanged, so the CSV log, W&B and the
results CSV agree. W&B runs offline unless ``mode`` or ``$WANDB_MODE`` says otherwise (no account needed;
``wandb sync <run dir>/wandb/offline-run-*`` uploads later), and wandb is imported only when used.

A W&B run is labelled by :func:`wandb_labels`: grouped by study (a sweep's runs side by side), named
``problem-method[-variant]-seedN``, tagged with the problem, method, objective, form and trainer. Its console
is quiet (no ``wandb:`` lines) unless ``verbose``; the saved checkpoint is uploaded as a ``model`` artifact only
with ``log_checkpoint`` (it can be large).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hardlinear.harness.results import study_of
from hardlinear.runtime.atomic import atomic_write_bytes, disk_full

WANDB_MISSING = "the W&B logger needs wandb: pip install 'hardlinear[wandb]' (or use logger=csv)"


def _plain(value: Any) -> Any:
    """Python scalars from numpy / torch scalars; everything else as is."""
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        return value.item()
    return value


def _numeric(metrics: Mapping[str, Any]) -> dict[str, float | int]:
    out = {}
    for k, v in metrics.items():
        v = _plain(v)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = v
    return out


def _json_default(value: Any) -> Any:
    value = _plain(value)
    return value if isinstance(value, (int, float, str, bool)) or value is None else str(value)


class CSVLogger:
    """``<run_dir>/epochs.csv`` (one row per epoch: epoch, phase, train/loss, val/...), ``config.json``,
    ``final.json`` and ``tables/<name>.csv``. Each epoch is flushed, so a killed run keeps its log; a key that
    first appears mid-run widens the header (the small file is rewritten)."""

    LEADING = ("epoch", "phase", "train/loss")

    def __init__(self, run_dir: str | os.PathLike, **_: Any) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / "epochs.csv"
        self.columns: list[str] = []
        self.rows: list[dict[str, Any]] = []

    def log_config(self, config: Mapping[str, Any]) -> None:
        text = json.dumps(config, indent=2, sort_keys=True, default=_json_default)
        atomic_write_bytes(self.run_dir / "config.json", text.encode())  # whole or absent, also on a full disk

    def log_epoch(self, epoch: int, metrics: Mapping[str, Any]) -> None:
        row = {"epoch": int(epoch), **{k: _plain(v) for k, v in metrics.items() if k != "epoch"}}
        self.rows.append(row)
        new = [k for k in row if k not in self.columns]
        if new:
            self.columns = [c for c in self.LEADING if c in self.columns or c in row]
            self.columns += sorted({k for r in self.rows for k in r} - set(self.columns))
            self._write(self.rows, header=True, mode="w")
        else:
            self._write([row], header=False, mode="a")

    def _write(self, rows: Sequence[Mapping[str, Any]], header: bool, mode: str) -> None:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        if header:
            writer.writerow(self.columns)
        for r in rows:
            writer.writerow(["" if r.get(c) is None else _cell(r.get(c)) for c in self.columns])
        if mode == "w":
            atomic_write_bytes(self.path, buf.getvalue().encode())
            return
        size = self.path.stat().st_size if self.path.exists() else 0
        try:
            with open(self.path, "a", newline="") as f:
                f.write(buf.getvalue())
                f.flush()
        except OSError as err:  # a full disk: cut the torn row, so the log holds whole rows only
            with open(self.path, "r+b") as f:
                f.truncate(size)
            raise disk_full(err, self.path, len(buf.getvalue().encode())) from None

    def log_final(self, metrics: Mapping[str, Any]) -> None:
        data = {k: _plain(v) for k, v in metrics.items()}
        atomic_write_bytes(self.run_dir / "final.json", json.dumps(data, indent=2, sort_keys=True, default=_json_default).encode())

    def log_table(self, name: str, dataframe) -> None:
        atomic_write_bytes(self.run_dir / "tables" / f"{name}.csv", dataframe.to_csv(index=False).encode())

    def log_checkpoint(self, path: str | os.PathLike, metadata: Mapping[str, Any] | None = None) -> None:
        """The checkpoint already lives in the run directory; nothing to copy."""

    def log_status(self, status: Mapping[str, Any]) -> None:
        """The record in the run directory says it already."""

    def finish(self) -> None:
        """Nothing is held open; kept for the common interface."""


def _cell(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return repr(value) if isinstance(value, float) else str(value)


def wandb_labels(config: Mapping[str, Any], variant: str = "") -> dict[str, Any]:
    """``name``, ``group`` and ``tags`` of a run's W&B run, from its resolved config.

    group: the study (``results.study_of``: ``study``, else the experiment, else ``default``); name: ``problem-method[-variant]-seedN``
    (readable in a sweep's list); tags: problem, method, objective, form and ``trainer=<name>``; job_type: ``train``,
    or ``eval`` for a re-evaluation of a saved model."""
    problem = dict(config.get("problem") or {})
    method = dict(config.get("method") or {})
    trainer = dict(config.get("trainer") or {})
    parts = [str(problem.get("name", "")), str(method.get("name", ""))]
    if variant:
        parts.append(str(variant).replace("=", "_"))
    parts.append(f"seed{config.get('seed', 0)}")
    tags = [problem.get("name"), method.get("name"), problem.get("objective"), problem.get("form")]
    tags.append(f"trainer={trainer['name']}" if trainer.get("name") else None)
    return {
        "name": "-".join(p for p in parts if p),
        "group": study_of(config),
        "tags": [str(t) for t in dict.fromkeys(tags) if t],
        "job_type": "eval" if config.get("evaluated") else "train",  # evaluate.py's records carry `evaluated`
    }


class WandbLogger:
    """A W&B run in ``run_dir`` (``<run_dir>/wandb/...``); ``mode`` None means ``$WANDB_MODE`` or offline.

    ``verbose`` False (default): W&B prints nothing (``silent``, console capture off), as ``WANDB_SILENT``.
    ``log_checkpoint`` True: :meth:`log_checkpoint` uploads the run's checkpoint as a ``model`` artifact."""

    def __init__(
        self,
        run_dir: str | os.PathLike,
        project: str = "hardlinear",
        mode: str | None = None,
        config: Mapping[str, Any] | None = None,
        name: str | None = None,
        group: str | None = None,
        tags: Sequence[str] | None = None,
        log_checkpoint: bool = False,
        verbose: bool = False,
        job_type: str = "train",
    ) -> None:
        mode = mode or os.environ.get("WANDB_MODE") or "offline"
        if mode not in ("offline", "online", "disabled", "shared"):
            raise ValueError(f"W&B mode must be offline, online, shared or disabled; got {mode!r}")
        try:
            import wandb
        except ImportError as err:
            raise ImportError(WANDB_MISSING) from err
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._wandb = wandb
        self.upload_checkpoint = bool(log_checkpoint)
        settings = wandb.Settings(console="off", silent=True) if not verbose else wandb.Settings(console="auto")
        self.run = wandb.init(
            dir=str(self.run_dir), project=project, mode=mode, config=dict(config) if config else None, name=name,
            group=group, tags=list(tags) if tags else None, settings=settings, job_type=job_type,
        )
        self.run.define_metric("epoch")
        for prefix in ("train/*", "val/*"):
            self.run.define_metric(prefix, step_metric="epoch")

    def log_config(self, config: Mapping[str, Any]) -> None:
        self.run.config.update(dict(config), allow_val_change=True)

    def log_epoch(self, epoch: int, metrics: Mapping[str, Any]) -> None:
        """Numeric values only (``phase`` and other strings stay in the CSV log)."""
        self.run.log({**_numeric(metrics), "epoch": int(epoch)})

    def log_final(self, metrics: Mapping[str, Any]) -> None:
        self.run.summary.update(_numeric(metrics))

    def log_table(self, name: str, dataframe) -> None:
        self.run.log({name: self._wandb.Table(dataframe=dataframe)})

    def log_checkpoint(self, path: str | os.PathLike, metadata: Mapping[str, Any] | None = None) -> None:
        """Upload ``path`` as a ``model`` artifact when ``log_checkpoint`` was asked for; else nothing."""
        if not self.upload_checkpoint:
            return
        artifact = self._wandb.Artifact(f"model-{self.run.id}", type="model", metadata=dict(metadata or {}))
        artifact.add_file(str(path))
        self.run.log_artifact(artifact)

    def log_status(self, status: Mapping[str, Any]) -> None:
        """The run's status, reason and identity (study, identity hash, problem content) in its summary, so the
        W&B table filters on what the record says."""
        self.run.summary.update({k: _json_default(v) for k, v in status.items()})

    def finish(self) -> None:
        self.run.finish()


LOGGERS = {"csv": CSVLogger, "wandb": WandbLogger}


def results_table(row: Mapping[str, Any]):
    """A run's results row as a one-row ``pandas.DataFrame`` (logged as ``results``: W&B shows it beside the
    curves); values that are not plain scalars become strings."""
    import pandas as pd

    return pd.DataFrame([{k: (v if isinstance(v, (int, float, str, bool)) or v is None else str(v)) for k, v in row.items()}])


class MultiLogger:
    """Forwards every call to each of its loggers, in order."""

    def __init__(self, loggers: Sequence[Any]) -> None:
        self.loggers = list(loggers)

    def log_config(self, config: Mapping[str, Any]) -> None:
        for lg in self.loggers:
            lg.log_config(config)

    def log_epoch(self, epoch: int, metrics: Mapping[str, Any]) -> None:
        for lg in self.loggers:
            lg.log_epoch(epoch, metrics)

    def log_final(self, metrics: Mapping[str, Any]) -> None:
        for lg in self.loggers:
            lg.log_final(metrics)

    def log_table(self, name: str, dataframe) -> None:
        for lg in self.loggers:
            lg.log_table(name, dataframe)

    def log_checkpoint(self, path: str | os.PathLike, metadata: Mapping[str, Any] | None = None) -> None:
        for lg in self.loggers:
            lg.log_checkpoint(path, metadata)

    def log_status(self, status: Mapping[str, Any]) -> None:
        for lg in self.loggers:
            lg.log_status(status)

    def finish(self) -> None:
        for lg in self.loggers:
            lg.finish()


def make_loggers(names: Sequence[str], run_dir: str | os.PathLike, **kwargs: Any) -> MultiLogger:
    """Loggers by name (``csv``, ``wandb``); ``kwargs`` (project, mode, config, name, group, tags) go to the
    loggers that take them (the CSV logger takes none)."""
    if isinstance(names, str):
        names = [names]
    unknown = [n for n in names if n not in LOGGERS]
    if unknown:
        raise ValueError(f"unknown logger(s) {unknown}; choose from {sorted(LOGGERS)}")
    return MultiLogger([LOGGERS[n](run_dir, **kwargs) for n in dict.fromkeys(names)])
