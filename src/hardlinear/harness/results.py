"""The results store: one immutable record per finished run, in its own run directory (DESIGN.md section 5).

Why records and not one shared CSV: a record is written once, atomically (a temporary file in the run
directory, ``fsync``, ``os.replace``, ``fsync`` of the directory) and never edited, so nothing is shared, no
lock is needed, and many processes or SLURM jobs on a shared file system can finish at once. A crash, a kill
or a full disk leaves either the whole record or no ``record.json`` at all (a stray temporary file is never
read). The results table is *derived*: ``load_records`` reads every ``record.json`` under the roots it is
given and returns one tidy row per run; it can be rebuilt at any time, and a file that does not parse, fails
its checksum or is not a record is reported by path and skipped, never half-read.

Layout of a run directory (Hydra's run or sweep sub-directory): ``record.json`` (this module),
``.hydra/config.yaml`` (Hydra), ``epochs.csv`` (the CSV logger), ``metrics.json`` (the metrics, a convenience
copy), ``per_instance.csv`` (each test instance's gap and violations), ``checkpoint.pt`` (saved models).

A record (``RECORD_SCHEMA``) holds ``identity`` (``identity``), ``results_version`` (``RESULTS_VERSION``),
``study``, ``status`` (``STATUSES``), ``reason`` (why a run is not ``ok``), ``row`` (the flat identity
columns and metrics of the table), ``config`` (the full resolved config), ``provenance`` (git sha, versions,
machine, time) and ``checksum`` (sha256 of the rest).

The paper study committed before records existed is ``results/paper/runs.csv``; it is kept as a read-only
input of the same loader (``read_legacy_csv``), never appended to. Why not converted into records: its rows
carry no resolved config, and a record claims one; and the committed CSV is the file the reproduction's
tables are checked against byte for byte.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import stat
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hardlinear.runtime.atomic import atomic_write_bytes, create_exclusive_bytes
from hardlinear.runtime.safe_read import read_at_most, within

RESULTS_VERSION = 2
"""Bumped whenever a change to the code alters results (a fixed bug, a new default): records of an older
version no longer count as done, so resume reruns them. Version 1 is the CSV store of ``results/paper/runs.csv``."""

RECORD_FILE = "record.json"
PER_INSTANCE_FILE = "per_instance.csv"
"""Beside a run's record: each test instance's gap and violations (``hardlinear.evaluation.metrics.per_instance_csv``),
what the record's statistics summarise; written before the record, atomically, so a record never lacks it."""
RECORD_SCHEMA = "hardlinear-record/1"
STATUSES: tuple[str, ...] = ("ok", "diverged", "skipped", "not_applicable", "failed", "interrupted")
"""``ok``; ``diverged`` (non-finite loss, or metrics beyond ``eval.diverged_gap`` / ``eval.diverged_viol``);
``skipped`` (a solver missing or its licence refusing); ``not_applicable`` (``NotApplicable`` from setup);
``failed`` (any other error); ``interrupted`` (Ctrl-C: rerun by resume)."""
DONE_STATUSES = frozenset({"ok", "diverged", "not_applicable"})
"""Statuses that resume counts as done. ``skipped`` and ``failed`` are rerun: a licence may be installed and a
bug fixed since, and neither has a result to keep."""
DEFAULT_STUDY = "default"

NON_IDENTITY_KEYS: tuple[str, ...] = (
    "hydra", "logger", "progress", "trainer.progress", "results_dir", "rerun", "study", "experiment", "cache_dir",
    "data.scheduler", "search",
)
"""Dotted config keys that cannot change a result and so are left out of a run's identity: Hydra's own
bookkeeping, the logger choice, progress bars, where records are looked for (``results_dir``), the rerun flag,
the study and experiment names (labels), ``cache_dir`` (the caches are keyed by content and checksummed,
so any location gives the same data), ``data.scheduler`` (a dask cluster's address: the same solutions on any
cluster, and a restarted cluster has a new address; ``data.executor``, like ``data.workers``, still counts) and
``search`` (the metric a hyperparameter search minimises). Every other key of the resolved config counts."""

IDENTITY_COLUMNS: tuple[str, ...] = (
    "problem", "objective", "form", "uncertainty", "method", "variant", "seed", "penalty", "pretrain_epochs",
    "experiment", "git_sha", "device", "dtype", "timestamp", "run_dir", "config_hash", "n", "m_eq", "m_ineq", "k",
    "status",
)
METRIC_COLUMNS: tuple[str, ...] = (
    "test/gap_mean", "test/gap_worst", "test/gap_sgm", "test/gap_median", "test/gap_p95", "test/gap_p99",
    "test/eq_viol_mean", "test/eq_viol_worst", "test/ineq_viol_mean", "test/ineq_viol_worst", "test/max_abs_viol", "test/time_ms", "test/throughput", "test/iterations",
    "test/alpha_one_frac", "test/out_of_domain", "train/time_s", "offline/time_s", "offline/t_star",
)
COLUMNS: tuple[str, ...] = IDENTITY_COLUMNS + METRIC_COLUMNS
RECORD_COLUMNS: tuple[str, ...] = ("study", "identity", "results_version", "reason", "record")
"""Columns the loader adds to every row: the study, the identity, the results version, the reason for a
status other than ``ok``, and the path of the record (or ``legacy CSV:line``)."""
CONFIG_PREFIX = "cfg."
"""Config keys appear in the table as ``cfg.<dotted key>`` (``cfg.trainer.lr``) columns."""
NUMERIC_IDENTITY: tuple[str, ...] = ("seed", "pretrain_epochs", "n", "m_eq", "m_ineq", "k")


# --- identity -------------------------------------------------------------------------------------------
def normalise(value: Any) -> Any:
    """A config value in canonical form: integral floats become ints (``1.0`` -> ``1``), ``-0.0`` -> ``0``,
    non-finite floats their names, mappings sorted; bools and strings unchanged."""
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        return int(value) if value.is_integer() and abs(value) < 2**63 else value
    if isinstance(value, Mapping):
        return {str(k): normalise(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [normalise(v) for v in value]
    return str(value)


def identity_config(config: Mapping[str, Any], exclude: Iterable[str] = NON_IDENTITY_KEYS) -> dict:
    """The part of a resolved config that defines a run: ``config`` minus the dotted ``exclude`` keys,
    normalised (``normalise``), plus ``results_version``."""
    if not isinstance(config, Mapping):
        raise TypeError(f"identity needs a dict (OmegaConf.to_container(cfg, resolve=True)); got {type(config).__name__}")
    drop = {tuple(k.split(".")) for k in exclude}

    def strip(node: Mapping, prefix: tuple[str, ...]) -> dict:
        out = {}
        for key, value in node.items():
            path = prefix + (str(key),)
            if path in drop:
                continue
            out[str(key)] = strip(value, path) if isinstance(value, Mapping) else value
        return out

    kept = normalise(strip(config, ()))
    kept["results_version"] = RESULTS_VERSION
    return kept


def identity(config: Mapping[str, Any], exclude: Iterable[str] = NON_IDENTITY_KEYS) -> str:
    """A run's identity: 16 hex digits of the sha256 of ``identity_config`` as sorted-key JSON."""
    text = json.dumps(identity_config(config, exclude), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


config_hash = identity  # the name the tables and older code use


def study_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot be a study name, or None. A study names a folder (``results/tables/<study>/``), so it
    must be one plain path component: not empty, no ``/`` or ``\\``, not ``.`` or ``..``, no NUL, not absolute."""
    if not isinstance(name, str):
        return f"is a {type(name).__name__}, not a name"
    if not name.strip():
        return "is empty; give a name such as smoke"
    if "/" in name or "\\" in name or "\x00" in name or name in (".", "..") or os.path.isabs(name) or len(name) > 200:
        safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in name).strip("-.")[:60] or "mystudy"
        return f"must be one folder name (no '/', '\\', '..', not absolute; at most 200 characters); e.g. study={safe}"
    return None


def check_study_name(name: Any, key: str = "study") -> str:
    """``name`` when it is a safe study name (:func:`study_name_problem`), else ``ValueError`` naming the fix."""
    problem = study_name_problem(name)
    if problem:
        raise ValueError(f"{key} {name!r} {problem}")
    return name


def study_of(config: Mapping[str, Any]) -> str:
    """The study a run belongs to: ``study`` when set, else ``experiment`` when set, else ``DEFAULT_STUDY``."""
    for key in ("study", "experiment"):
        value = config.get(key)
        if value not in (None, ""):
            return str(value)
    return DEFAULT_STUDY


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"trainer": {"lr": 1e-3}}`` -> ``{"trainer.lr": 0.001}``; lists become JSON text."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        elif isinstance(value, (list, tuple)):
            out[name] = json.dumps(normalise(list(value)))
        else:
            out[name] = normalise(value)
    return out


# --- writing --------------------------------------------------------------------------------------------
def _checksum(body: Mapping[str, Any]) -> str:
    text = json.dumps({k: v for k, v in body.items() if k != "checksum"}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _jsonable(value: Any) -> Any:
    """JSON without NaN tokens: non-finite floats as their names (read back by ``_from_json``)."""
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def write_record(run_dir: str | os.PathLike, record: Mapping[str, Any]) -> Path:
    """Write ``record`` as ``<run_dir>/record.json``, atomically and once; returns its path.

    ``record`` needs ``identity``, ``study``, ``status`` (one of ``STATUSES``), ``row`` and ``config``; a
    status other than ``ok`` needs a ``reason``. ``schema``, ``results_version`` and ``checksum`` are added.
    A run directory holds one record: a second write raises ``FileExistsError`` (records are never edited).
    The row's ``run_dir`` is stored relative to the results root (:func:`stored_run_dir`).
    """
    run_dir = Path(run_dir)
    body = _jsonable(dict(record))
    if isinstance(body.get("row"), dict) and isinstance(body.get("config"), dict):
        where = body["row"].get("run_dir") or run_dir  # the run's own directory (a record may be staged elsewhere first)
        body["row"] = {**body["row"], "run_dir": stored_run_dir(where, body["config"].get("results_dir"))}
    for key in ("identity", "study", "status", "row", "config"):
        if key not in body:
            raise ValueError(f"a record needs {key!r}; got keys {sorted(body)}")
    if body["status"] not in STATUSES:
        raise ValueError(f"record status must be one of {STATUSES}; got {body['status']!r}")
    if body["status"] != "ok" and not str(body.get("reason", "")).strip():
        raise ValueError(f"a record with status {body['status']!r} needs a reason (say why it has no normal result)")
    body.setdefault("reason", "")
    body.setdefault("provenance", {})
    body["schema"] = RECORD_SCHEMA
    body.setdefault("results_version", RESULTS_VERSION)
    body["checksum"] = _checksum(body)
    data = (json.dumps(body, indent=1, sort_keys=True, allow_nan=False) + "\n").encode()
    run_dir.mkdir(parents=True, exist_ok=True)
    final = run_dir / RECORD_FILE
    try:
        return create_exclusive_bytes(final, data, durable=True)
    except FileExistsError:
        kept = _keep_beside(run_dir, body, data)
    raise FileExistsError(
        f"{final} exists (another run wrote it first): a run directory holds one record, never rewritten. This run's "
        f"record was kept, unread by the loader, as {kept}; give each run its own directory (hydra.run.dir=...)"
    )


def stored_run_dir(run_dir: str | os.PathLike, results_root: str | os.PathLike | None) -> str:
    """``run_dir`` as a record stores it: relative to the run's results root (``results_dir``; the working directory
    when there is none). Why: a record is data that moves (a results folder copied, shared or committed), and an
    absolute path names the machine that made it; the loader takes a run's directory from where its record is
    found, so the stored one only says where the run sat inside its results folder."""
    root = Path(results_root) if results_root not in (None, "") else Path.cwd()
    return Path(os.path.relpath(Path(run_dir).absolute(), root.absolute())).as_posix()


def _keep_beside(run_dir: Path, body: Mapping[str, Any], data: bytes) -> Path:
    """Save the record that lost the race under a name the loader does not read, so nothing computed is lost."""
    stamp = str(body.get("row", {}).get("timestamp", "")).replace(":", "") if isinstance(body.get("row"), Mapping) else ""
    for attempt in range(1000):
        path = run_dir / f"record.conflict-{body.get('identity', '')}-{stamp}-{os.getpid()}-{attempt}.json"
        try:
            return create_exclusive_bytes(path, data, durable=True)
        except FileExistsError:
            continue
    raise FileExistsError(f"{run_dir}: could not keep this run's record beside the existing one (1000 names taken)")


# --- reading records ------------------------------------------------------------------------------------
class BadRecord(ValueError):
    """A ``record.json`` that cannot be trusted: unreadable, not JSON, not a record, or a checksum mismatch."""


MAX_RECORD_BYTES = 64 * 2**20
"""Largest ``record.json`` read (ours are a few kB); a bigger file (or ``/dev/zero`` behind a symlink) is refused
after reading at most this much."""
MAX_RECORD_DEPTH = 64
"""Deepest nesting a record may have (ours: under 10 levels); deeper is refused before anything recurses into it."""
RECORD_TYPES: dict[str, type | tuple[type, ...]] = {
    "identity": str, "study": str, "status": str, "row": dict, "config": dict, "reason": str,
    "provenance": dict, "results_version": int, "schema": str, "checksum": str,
}
"""The type every field of a record must have; a record with a valid checksum but another type is reported."""


def _read_bounded(path: Path) -> bytes:
    """The bytes of a regular file, at most :data:`MAX_RECORD_BYTES`; ``BadRecord`` for anything else (a FIFO
    or a directory named ``record.json``, a symlink loop or a dangling one, a device, an unreadable file)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not block the loader
    except OSError as err:
        raise BadRecord(f"{path}: cannot be opened ({type(err).__name__}: {err.strerror or err}); not read") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "a FIFO" if stat.S_ISFIFO(info.st_mode) else "not a regular file"
            raise BadRecord(f"{path}: is {kind}, not a record file; not read")
        data = read_at_most(fd, MAX_RECORD_BYTES)
        if data is None:
            raise BadRecord(f"{path}: larger than {MAX_RECORD_BYTES // 2**20} MiB, so not a record; not read")
        return data
    except OSError as err:
        raise BadRecord(f"{path}: cannot be read ({type(err).__name__}: {err.strerror or err}); not read") from None
    finally:
        os.close(fd)


def _depth_problem(value: Any) -> str | None:
    """Where ``value`` nests deeper than :data:`MAX_RECORD_DEPTH`, iteratively (no recursion), or None."""
    stack = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_RECORD_DEPTH:
            return f"nests deeper than {MAX_RECORD_DEPTH} levels"
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return None


def _type_problems(body: dict) -> list[str]:
    """The fields of a record whose type is wrong, in words (``row is list, not dict``)."""
    out = []
    for key, kind in RECORD_TYPES.items():
        if key in body and not (isinstance(body[key], kind) and not isinstance(body[key], bool)):
            names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
            out.append(f"{key} is {type(body[key]).__name__}, not {names}")
    study = body.get("study")
    if isinstance(study, str):
        problem = study_name_problem(study)
        if problem:
            out.append(f"study {study!r} {problem}")
    return out


def read_record(path: str | os.PathLike) -> dict:
    """One record, verified (size, depth, schema, checksum, field types); ``BadRecord`` saying why otherwise."""
    path = Path(path)
    data = _read_bounded(path)
    try:
        body = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise BadRecord(f"{path}: not a record (JSON nested too deep to read)") from None
    except (UnicodeDecodeError, ValueError) as err:
        raise BadRecord(f"{path}: not a readable record ({type(err).__name__}: {err})") from None
    deep = _depth_problem(body)
    if deep:
        raise BadRecord(f"{path}: not a record ({deep})")
    if not isinstance(body, dict) or body.get("schema") != RECORD_SCHEMA:
        schema = body.get("schema") if isinstance(body, dict) else None
        raise BadRecord(f"{path}: not a hardlinear record (schema {str(schema)[:60]!r})")
    if body.get("checksum") != _checksum(body):
        raise BadRecord(f"{path}: checksum mismatch (edited or corrupted); not read")
    missing = [k for k in ("identity", "study", "status", "row", "config") if k not in body]
    if missing or body["status"] not in STATUSES:
        raise BadRecord(f"{path}: incomplete record (missing {missing}, status {str(body.get('status'))[:40]!r})")
    wrong = _type_problems(body)
    if wrong:
        raise BadRecord(f"{path}: not a well-typed record ({'; '.join(wrong)}); not read")
    return body


def find_record_files(roots: Iterable[str | os.PathLike]) -> tuple[list[Path], list[str]]:
    """``([path, ...], [problem, ...])``: every entry named ``record.json`` under the directory roots (whatever it
    is: a file, a symlink, a directory, a FIFO; :func:`read_record` says which are records), and one line per
    directory that could not be listed (an unreadable directory hides its records: said, not skipped silently).
    Symlinked directories are not followed (no loops, no escaping the root), nor a ``record.json`` link that leads
    out of the root (reported)."""
    found: set[Path] = set()
    problems: list[str] = []
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            continue

        def unlisted(err: OSError) -> None:
            problems.append(f"{err.filename}: directory cannot be listed ({type(err).__name__}: {err.strerror}); its records are not read")

        for folder, dirs, files in os.walk(root, onerror=unlisted, followlinks=False):
            if RECORD_FILE in files or RECORD_FILE in dirs:
                path = Path(folder) / RECORD_FILE
                if path.is_symlink() and _leads_out(path, root):  # a results root is read inside itself only
                    problems.append(f"{path}: a link leading out of the results root {root}; not read")
                    continue
                found.add(path)
    return sorted(found), problems


def _leads_out(path: Path, root: Path) -> bool:
    """Whether the link ``path`` resolves to a regular file outside ``root`` (a loop, a dangling link or a device is
    left to :func:`read_record`, which names it)."""
    try:
        if not path.resolve(strict=True).is_file():
            return False
    except (OSError, RuntimeError):
        return False
    return not within(path, root)


def record_paths(roots: Iterable[str | os.PathLike]) -> list[Path]:
    """Every ``record.json`` under the directory roots, sorted (see :func:`find_record_files`)."""
    return find_record_files(roots)[0]


def scan(roots: Iterable[str | os.PathLike]) -> tuple[list[tuple[Path, dict]], list[str]]:
    """``([(path, record), ...], [problem, ...])``: the verified records under ``roots`` and one line per
    file that was not read (path and why), and per directory that could not be listed."""
    paths, bad = find_record_files(roots)
    good = []
    for path in paths:
        try:
            good.append((path, read_record(path)))
        except BadRecord as err:
            bad.append(str(err))
    return good, bad


def find_recorded(
    root: str | os.PathLike, run_identity: str, study: str | None = None, statuses: Iterable[str] = DONE_STATUSES,
) -> tuple[Path, dict] | None:
    """The newest record under ``root`` with this identity (in ``study`` when given) and a done status, or None:
    resume's question. Why per study: a study's tables need its own runs, so an identical run recorded for
    another study does not stand in for it."""
    wanted = set(statuses)
    hits = []
    good, bad = scan([root])
    for line in bad:
        warnings.warn(f"skipping {line}", stacklevel=2)
    for path, body in good:
        if body["identity"] == run_identity and body["status"] in wanted and (study is None or body["study"] == study):
            hits.append((str(body.get("row", {}).get("timestamp", "")), str(path), path, body))
    if not hits:
        return None
    _, _, path, body = max(hits, key=lambda h: (h[0], h[1]))
    return path, body


def record_row(path: Path, body: Mapping[str, Any]) -> dict[str, Any]:
    """One tidy row of a record: its ``row``, the ``RECORD_COLUMNS`` and its config as ``cfg.*`` columns."""
    row = {k: _from_json(v) for k, v in body["row"].items()}
    row.update({
        "status": body["status"], "study": body["study"], "identity": body["identity"],
        "results_version": body.get("results_version", ""), "reason": body.get("reason", ""), "record": str(path),
    })
    row.setdefault("config_hash", body["identity"])
    row["run_dir"] = str(path.parent)  # where the run's files are now; the record stores it relative to its root
    row.update({CONFIG_PREFIX + k: v for k, v in flatten(body["config"]).items()})
    return row


def _from_json(value: Any) -> Any:
    if value in ("nan", "inf", "-inf"):
        return float(value)
    return value


# --- reading the legacy CSV store (read-only) -----------------------------------------------------------
def _read_csv_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """Header and rows of a legacy results CSV as strings; a line that does not parse to the header's width
    (a torn write, binary garbage) is reported and skipped."""
    from hardlinear.runtime.safe_read import read_regular

    if not path.exists() or path.stat().st_size == 0:
        return [], []
    try:  # a FIFO or /dev/zero named like a results CSV is reported, never waited on
        lines = read_regular(path, MAX_LEGACY_CSV_BYTES).decode("utf-8", errors="replace").split("\n")
    except OSError as err:
        warnings.warn(f"{path}: not read ({err})", stacklevel=3)
        return [], []
    header = next(csv.reader([lines[0]]))
    if "status" not in header or "problem" not in header:
        warnings.warn(f"{path}: first line is not a results header ({lines[0][:60]!r}); file not read", stacklevel=3)
        return [], []
    rows: list[dict[str, str]] = []
    for number, text in enumerate(lines[1:], start=2):
        if not text.strip():
            continue
        try:
            fields = next(csv.reader([text]))
        except csv.Error:
            fields = None
        if fields is None or len(fields) != len(header) or "\ufffd" in text:
            warnings.warn(f"{path}:{number}: skipping a malformed line: {text[:80]!r}", stacklevel=3)
            continue
        rows.append({**dict(zip(header, fields)), "record": f"{path}:{number}"})
    return header, rows


MAX_LEGACY_CSV_BYTES = 256 * 2**20
"""Largest legacy results CSV read (the paper study's is under 1 MB)."""
LEGACY_SKIPPED = "runs.skipped.csv"
LEGACY_SUPERSEDED = "superseded.csv"
SUPERSEDED_REASON = "rerun queued (its earlier rows are in superseded.csv)"


def read_legacy_csv(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Rows of a results CSV of the old store (version 1), with the rows of its siblings ``<stem>.skipped.csv``
    (status ``skipped``/``failed`` with a reason) and ``superseded.csv`` (status ``superseded``: moved out by
    scripts/maintainers/supersede.py, not yet rerun). Study: the row's ``study`` column if any, else the CSV's folder name
    (``results/paper/runs.csv`` -> ``paper``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"results CSV not found: {path}")
    out: list[dict[str, Any]] = []
    skipped = path.with_name(f"{path.stem}.skipped{path.suffix or '.csv'}")
    sources = [(path, None), (skipped, "skipped"), (path.with_name(LEGACY_SUPERSEDED), "superseded")]
    for source, forced in sources:
        if forced is not None and not source.is_file():
            continue
        _, rows = _read_csv_rows(source)
        for row in rows:
            row["study"] = row.get("study") or path.parent.name
            unsafe = study_name_problem(row["study"])
            if unsafe:
                warnings.warn(f"{row['record']}: skipping a row whose study {row['study']!r} {unsafe}", stacklevel=2)
                continue
            row["results_version"] = 1
            row["identity"] = f"v1:{row.get('config_hash', '')}"
            if forced == "superseded":
                row["status"], row["reason"] = "superseded", SUPERSEDED_REASON
            elif forced == "skipped":
                row["status"] = row.get("status") or "skipped"
            else:
                row["status"] = row.get("status") or "ok"
            out.append(row)
    return out


# --- the derived table ----------------------------------------------------------------------------------
def load_records(
    roots: str | os.PathLike | Sequence[str | os.PathLike],
    study: str | None = None,
    where: Mapping[str, Any] | None = None,
    all_runs: bool = False,
    quiet: bool = False,
):
    """The tidy results table (``pandas.DataFrame``, one row per run) from the records under ``roots``.

    ``roots``: directories (every ``record.json`` below) and legacy results CSVs (``read_legacy_csv``).
    ``study``: keep that study only; ``where``: ``{key: value}`` on any column or config key (``trainer.lr``
    matches ``cfg.trainer.lr``; numbers compare normalised, ``1`` = ``1.0``). A run recorded more than once
    in a study (a forced rerun, two identical sweeps at once) is one row, the newest, unless ``all_runs``. Files that
    are not read are listed in ``df.attrs["unreadable"]`` and warned about unless ``quiet``.
    Columns: ``COLUMNS``, ``RECORD_COLUMNS``, other metric keys, then ``cfg.*`` (sorted).
    """
    import pandas as pd

    if isinstance(roots, (str, os.PathLike)):
        roots = [roots]
    roots = [Path(r) for r in roots]
    legacy_rows: list[dict[str, Any]] = []
    for root in roots:
        if root.is_file():
            legacy_rows += read_legacy_csv(root)
        elif not root.exists():
            continue
    records, bad = scan([r for r in roots if r.is_dir()])
    if bad and not quiet:
        for line in bad:
            warnings.warn(f"skipping {line}", stacklevel=2)
    new_rows = [record_row(p, b) for p, b in records]
    if not all_runs and new_rows:
        newest: dict[tuple[str, str], dict] = {}
        for row in new_rows:
            key = (row["study"], row["identity"])
            if key not in newest or (str(row.get("timestamp", "")), row["record"]) > (str(newest[key].get("timestamp", "")), newest[key]["record"]):
                newest[key] = row
        new_rows = [r for r in new_rows if newest[(r["study"], r["identity"])] is r]
    columns = list(COLUMNS) + list(RECORD_COLUMNS)
    extra = sorted({k for r in legacy_rows + new_rows for k in r} - set(columns))
    columns += [c for c in extra if not c.startswith(CONFIG_PREFIX)] + [c for c in extra if c.startswith(CONFIG_PREFIX)]
    df = pd.DataFrame.from_records(legacy_rows + new_rows, columns=columns) if (legacy_rows or new_rows) else pd.DataFrame(columns=columns)
    df = _typed(df)
    if study is not None:
        df = df[df["study"] == str(study)]
    for key, value in (where or {}).items():
        df = df[_matches(df, key, value)]
    df = df.reset_index(drop=True)
    df.attrs["unreadable"] = bad
    return df


DEFAULT_ROOTS: tuple[str, ...] = ("results", "results/paper/runs.csv")
"""What ``make tables`` / ``make figures`` / ``make aggregate`` read by default: every record under
``results/`` (single runs, sweeps, new paper runs) and the committed paper study of the legacy CSV."""


def report_table(results, study: str | None = None, where: Mapping[str, Any] | None = None):
    """What tables and figures read: ``results`` is a loaded table (filtered here) or results roots, each of
    which must exist (``FileNotFoundError`` naming ``--results`` otherwise)."""
    import pandas as pd

    if isinstance(results, pd.DataFrame):
        df = results if study is None else results[results["study"] == str(study)]
        for key, value in (where or {}).items():
            df = df[_matches(df, key, value)]
        return df.reset_index(drop=True)
    roots = [results] if isinstance(results, (str, os.PathLike)) else list(results)
    missing = [str(r) for r in roots if not Path(r).exists()]
    if missing or not roots:
        raise FileNotFoundError(f"results not found: {', '.join(missing) or 'no roots given'} (run experiments first, or pass --results)")
    return load_records(roots, study=study, where=where)


def parse_where(items: Iterable[str]) -> dict[str, str]:
    """``["trainer.name=fast", "seed=0"]`` -> ``{"trainer.name": "fast", "seed": "0"}``; a clear error otherwise."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"a filter is KEY=VALUE (e.g. trainer.name=fast); got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _canon(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return value
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return json.dumps(normalise(value))


def _matches(df, key: str, value: Any):
    column = key if key in df.columns else CONFIG_PREFIX + key
    if column not in df.columns:
        known = sorted(c[len(CONFIG_PREFIX):] for c in df.columns if c.startswith(CONFIG_PREFIX))
        raise KeyError(f"filter {key}={value}: no column or config key {key!r} in the results (config keys: {', '.join(known[:40])} ...)")
    want = _canon(value)
    return [(_canon(v) == want) for v in df[column]]


def _typed(df):
    """Numbers where the columns hold numbers (metrics, sizes, seed), strings in identity columns ("" for missing)."""
    import pandas as pd

    for col in df.columns:
        if col in NUMERIC_IDENTITY or col in METRIC_COLUMNS:
            df[col] = pd.to_numeric(df[col].replace("", None), errors="coerce").astype(float)
        elif col in IDENTITY_COLUMNS or col in RECORD_COLUMNS:
            df[col] = df[col].fillna("").astype(str)
        elif not col.startswith(CONFIG_PREFIX):
            values = df[col].map(lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
            parsed = pd.to_numeric(values.replace("", None), errors="coerce")
            if len(values) and not (parsed.isna() & (values != "") & (values.str.lower() != "nan")).any():
                df[col] = parsed.astype(float)
    return df


def studies(df) -> list[str]:
    """The studies present in a results table, sorted."""
    return sorted({s for s in df["study"] if s}) if len(df) else []


# --- export of the derived table ------------------------------------------------------------------------
def _line(values: Iterable[Any]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(["" if v is None or (isinstance(v, float) and math.isnan(v)) else (repr(v) if isinstance(v, float) else v) for v in values])
    return buf.getvalue()


def aggregate(roots: Sequence[str | os.PathLike], out: str | os.PathLike, study: str | None = None, where: Mapping[str, Any] | None = None):
    """Write the derived table of ``roots`` to the CSV ``out`` (atomically, sorted by study and identity so the
    same records give the same bytes) and return it."""
    if not roots:
        raise ValueError("aggregate needs at least one root (a results directory or a legacy results CSV)")
    if study is not None:
        check_study_name(study, "--study")
    for root in roots:
        if not Path(root).exists():
            raise FileNotFoundError(f"results root not found: {root}")
    df = load_records(roots, study=study, where=where)
    keys = ["study", "problem", "objective", "form", "method", "variant", "seed", "timestamp", "identity", "record"]
    df = df.sort_values(keys, kind="stable").reset_index(drop=True)
    text = _line(df.columns) + "".join(_line(rec) for rec in df.itertuples(index=False))
    atomic_write_bytes(out, text.encode())
    return df
