"""The results store: one CSV row per finished run, appended safely by parallel jobs (DESIGN.md section 5).

Why a plain CSV: every table and figure is a pure function of it, it merges across machines with
``aggregate``, and a human can read it. Safety under parallel sweeps (separate processes, joblib, SLURM jobs
on a shared filesystem) comes from a ``filelock.FileLock`` on ``<path>.lock`` around every write, and from
writing each record as one ``os.write`` of a complete line followed by ``fsync``: a crash can at worst lose
the record being written, never leave a half line that a later append would glue onto. String values are
flattened to one physical line (newlines become spaces) so that one record is always one line.

Columns: ``COLUMNS`` (identity, then metrics) is the single source of truth; keys a row has beyond those are
kept in extra columns after them (the header is rewritten, atomically and under the lock, the first time a
new key appears), never dropped. Skipped runs go to the sibling ``<stem>.skipped.csv`` with a ``reason``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import tempfile
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

IDENTITY_COLUMNS: tuple[str, ...] = (
    "problem",
    "objective",
    "form",
    "uncertainty",
    "method",
    "variant",
    "seed",
    "penalty",
    "pretrain_epochs",
    "experiment",
    "git_sha",
    "device",
    "dtype",
    "timestamp",
    "run_dir",
    "config_hash",
    "n",
    "m_eq",
    "m_ineq",
    "k",
    "status",
)
METRIC_COLUMNS: tuple[str, ...] = (
    "test/gap_mean",
    "test/gap_worst",
    "test/eq_viol_mean",
    "test/eq_viol_worst",
    "test/ineq_viol_mean",
    "test/ineq_viol_worst",
    "test/max_abs_viol",
    "test/time_ms",
    "test/throughput",
    "test/iterations",
    "test/alpha_one_frac",
    "test/out_of_domain",
    "train/time_s",
    "offline/time_s",
    "offline/t_star",
)
COLUMNS: tuple[str, ...] = IDENTITY_COLUMNS + METRIC_COLUMNS
SKIP_COLUMNS: tuple[str, ...] = IDENTITY_COLUMNS + ("reason",)
# Identity columns read back as numbers (everything else identity-like stays a string: "penalty" too, so that
# "0.5" and "5000" print as they were configured).
NUMERIC_IDENTITY: tuple[str, ...] = ("seed", "pretrain_epochs", "n", "m_eq", "m_ineq", "k")
# Config keys that do not change a run's result: where it is recorded, how it is logged, Hydra's own bookkeeping.
HASH_EXCLUDE: frozenset[str] = frozenset({"results_csv", "hydra", "logger", "progress"})


# --- hashing --------------------------------------------------------------------------------------------
def config_hash(cfg: Mapping[str, Any], exclude: Iterable[str] | None = None) -> str:
    """Stable 16-hex-digit hash of a resolved config: sha256 of sorted-key JSON without the ``exclude`` keys.

    Only top-level keys are excluded (``hydra``, ``logger``, ...): nested keys are part of the result.
    """
    if not isinstance(cfg, Mapping):
        raise TypeError(f"config_hash needs a dict (OmegaConf.to_container(cfg, resolve=True)); got {type(cfg).__name__}")
    drop = HASH_EXCLUDE if exclude is None else frozenset(exclude)
    kept = {k: v for k, v in cfg.items() if k not in drop}
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# --- writing --------------------------------------------------------------------------------------------
def skipped_path(path: str | os.PathLike) -> Path:
    """``results/runs.csv`` -> ``results/runs.skipped.csv``."""
    p = Path(path)
    return p.with_name(f"{p.stem}.skipped{p.suffix or '.csv'}")


def append_row(path: str | os.PathLike, row: Mapping[str, Any]) -> None:
    """Append one run record to the results CSV at ``path`` (created with its header when new or empty)."""
    _append(Path(path), dict(row), COLUMNS)


def record_skip(path: str | os.PathLike, row: Mapping[str, Any], reason: str) -> None:
    """Record a run that produced no metrics (licence refused, solver missing, crash) in ``<stem>.skipped.csv``.

    ``path`` is the results CSV the run would have gone to; only identity columns and ``reason`` are kept,
    never metrics, so that a skipped run can never pass for a result.
    """
    if not str(reason).strip():
        raise ValueError("record_skip needs a non-empty reason (say why the run has no metrics)")
    record = {k: row[k] for k in IDENTITY_COLUMNS if k in row}
    record["status"] = row.get("status") or "skipped"
    record["reason"] = reason
    _append(skipped_path(path), record, SKIP_COLUMNS)


def _cell(value: Any) -> str:
    """One CSV cell: numbers at full precision (``repr`` of the float), strings on one line."""
    if value is None:
        return ""
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        value = value.item()  # numpy / torch scalars
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ("nan" if math.isnan(value) else ("inf" if value > 0 else "-inf"))
    return " ".join(str(value).splitlines()).replace("\r", " ")


def _line(values: Iterable[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(list(values))
    return buf.getvalue()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _lock(path: Path):
    from filelock import FileLock

    return FileLock(str(path) + ".lock")


def _append(path: Path, row: dict[str, Any], base: tuple[str, ...]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with _lock(path):
        header = _read_header(path)
        if header is None:
            header = list(base)
        new_keys = [k for k in row if k not in header]
        if new_keys:
            header = header + new_keys
            if path.exists() and path.stat().st_size > 0:
                _rewrite_with_header(path, header)
        fresh = not path.exists() or path.stat().st_size == 0
        data = _line(_cell(row.get(c)) for c in header)
        if fresh:
            data = _line(header) + data
        elif not _ends_with_newline(path):
            data = "\n" + data  # a torn line left by a crashed writer of an older version: start a new line
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            _write_all(fd, data.encode())
            os.fsync(fd)
        finally:
            os.close(fd)


def _read_header(path: Path) -> list[str] | None:
    if not path.exists() or path.stat().st_size == 0:
        return None
    with open(path, newline="") as f:
        first = f.readline()
    if not first.endswith("\n"):
        return None if not first.strip() else next(csv.reader([first]))
    return next(csv.reader([first]))


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def _rewrite_with_header(path: Path, header: list[str]) -> None:
    """Rewrite the file with a wider header (new extra columns, empty in old rows); atomic by rename."""
    old_header, records = _read_records(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="") as f:
            f.write(_line(header))
            for rec in records:
                f.write(_line(rec.get(c, "") for c in header))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# --- reading --------------------------------------------------------------------------------------------
def _read_records(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """Header and records as strings; lines that do not parse to the header's width are skipped with a warning."""
    if not path.exists() or path.stat().st_size == 0:
        return [], []
    with open(path, newline="") as f:
        lines = f.read().split("\n")
    header = next(csv.reader([lines[0]]))
    records: list[dict[str, str]] = []
    for number, text in enumerate(lines[1:], start=2):
        if not text.strip():
            continue
        try:
            fields = next(csv.reader([text]))
        except csv.Error:
            fields = None
        if fields is None or len(fields) != len(header):
            warnings.warn(f"{path}:{number}: skipping a malformed line (torn write?): {text[:80]!r}", stacklevel=3)
            continue
        records.append(dict(zip(header, fields)))
    return header, records


def completed_hashes(path: str | os.PathLike) -> set[str]:
    """``config_hash`` of every recorded (status ``ok``) run in the results CSV; empty when there is no file."""
    _, records = _read_records(Path(path))
    return {r["config_hash"] for r in records if r.get("config_hash") and r.get("status", "ok") in ("ok", "")}


def is_recorded(path: str | os.PathLike, chash: str) -> bool:
    """Whether a run with this config hash already has a row (a restarted sweep skips it)."""
    return chash in completed_hashes(path)


def load_results(path: str | os.PathLike):
    """The results CSV as a ``pandas.DataFrame``: numeric metric and size columns, strings elsewhere
    (empty string where missing). Extra columns are numeric when every non-empty value parses."""
    import pandas as pd

    header, records = _read_records(Path(path))
    columns = header or list(COLUMNS)
    df = pd.DataFrame.from_records(records, columns=columns) if records else pd.DataFrame(columns=columns)
    return _typed(df)


def _typed(df):
    import pandas as pd

    for col in df.columns:
        if col in NUMERIC_IDENTITY or col in METRIC_COLUMNS:
            df[col] = pd.to_numeric(df[col].replace("", None), errors="coerce").astype(float)
        elif col not in IDENTITY_COLUMNS and col != "reason":
            values = df[col].astype(str)
            parsed = pd.to_numeric(values.replace("", None), errors="coerce")
            if len(values) and not (parsed.isna() & (values != "") & (values.str.lower() != "nan")).any():
                df[col] = parsed.astype(float)
        else:
            df[col] = df[col].fillna("").astype(str)
    return df


def load_skipped(path: str | os.PathLike):
    """The skipped-runs CSV (``<stem>.skipped.csv``; pass either that file or the results CSV)."""
    p = Path(path)
    if not p.name.endswith(".skipped.csv"):
        p = skipped_path(p)
    df = load_results(p)
    for col in SKIP_COLUMNS:
        if col not in df.columns:
            df[col] = ""
    return df


def aggregate(paths: list[str | os.PathLike], out: str | os.PathLike):
    """Merge several results CSVs into one tidy CSV at ``out`` and return it as a DataFrame.

    Rows with the same ``config_hash`` are one run recorded twice (a resumed sweep, a copied file): the newest
    (largest ``timestamp``) is kept. Rows without a hash are kept unless they are exact duplicates. The output
    is sorted by identity, so the same inputs give the same file.
    """
    import pandas as pd

    if not paths:
        raise ValueError("aggregate needs at least one input CSV")
    frames = []
    for p in paths:
        if not Path(p).exists():
            raise FileNotFoundError(f"results CSV not found: {p}")
        frames.append(_as_strings(Path(p)))
    columns = list(COLUMNS) + [c for f in frames for c in f.columns if c not in COLUMNS]
    columns = list(dict.fromkeys(columns))
    merged = pd.concat([f.reindex(columns=columns, fill_value="") for f in frames], ignore_index=True).fillna("")
    hashed = merged[merged["config_hash"] != ""]
    hashed = hashed.sort_values("timestamp", kind="stable").drop_duplicates("config_hash", keep="last")
    unhashed = merged[merged["config_hash"] == ""].drop_duplicates()
    merged = pd.concat([hashed, unhashed], ignore_index=True)
    merged = merged.sort_values(["problem", "objective", "form", "method", "variant", "seed", "timestamp", "config_hash"], kind="stable")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", newline="") as f:
        f.write(_line(columns))
        for rec in merged.itertuples(index=False):
            f.write(_line(rec))
    os.replace(tmp, out)
    return load_results(out)


def _as_strings(path: Path):
    import pandas as pd

    header, records = _read_records(path)
    return pd.DataFrame.from_records(records, columns=header or list(COLUMNS))
