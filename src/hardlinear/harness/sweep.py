"""Sweep bookkeeping: which run a multirun is on, an overall progress bar, and a summary that is right.

Registered as a Hydra callback in ``conf/config.yaml``. With the basic launcher jobs run in this process one
after the other, so the callback sees every start and end. With parallel launchers (joblib, submitit) the job
callbacks run in the workers, so the parent counts the records (``record.json``) appearing in the sweep
directory instead: the bar (or, when the output is not a terminal, one line per finished run) and the final
summary come from those records, by status.

Only this process's records count: each sweep draws a token (``HARDLINEAR_SWEEP_TOKEN``, inherited by the launcher's
workers) that the runs write into their records' provenance, so two sweeps forced into one folder do not count each
other's runs. A job that failed without a record of its own (a ``ConfigError``, refused before any work; a
``FileExistsError``: another process's record is in its directory) leaves its reason under ``.unrecorded/``; the
summary counts it apart (``unrecorded``), by kind of error, and ``run.py`` exits non-zero when any job of its sweep
failed or went unrecorded (:func:`sweep_failed`).
"""

from __future__ import annotations

# ruff: noqa: E402 - the imports after require_extra() need the harness extra
import logging
import math
import os
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hardlinear.harness import require_extra

require_extra()  # before Hydra's imports: a core install gets the pip line, not ModuleNotFoundError

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from hardlinear.harness import results
from hardlinear.harness.origin import SWEEP_TOKEN_ENV, sweep_token


def count_sweep(overrides: list[str]) -> int:
    """Number of jobs a list of sweep overrides expands to (the cartesian product of the sweeps)."""
    parsed = OverridesParser.create().parse_overrides(overrides)
    sizes = [len(list(o.sweep_iterator())) if o.is_sweep_override() else 1 for o in parsed]
    return math.prod(sizes) if sizes else 1


def sweep_overrides(config: DictConfig) -> list[str]:
    """The overrides the sweeper expands: the command line's, plus the config's ``hydra.sweeper.params`` for
    the keys the command line does not set (Hydra lets the command line win, e.g. ``seed=0`` over an
    experiment's ``seed: 0,1,2``)."""
    params = config.hydra.sweeper.get("params") or {}
    task = list(config.hydra.overrides.task)
    given = {o.split("=", 1)[0].lstrip("+~") for o in task}
    return task + [f"{k}={v}" for k, v in params.items() if k not in given]


UNRECORDED_DIR = ".unrecorded"
_FAILED: list[str] = []  # the sweeps of this process in which a job failed (what run.py's exit status reads)


def note_unrecorded_failure(run_dir: str | Path, reason: str) -> None:
    """Leave a line for the sweep's summary about a job that failed without a record of its own (best effort)."""
    token = sweep_token()
    if not token:
        return
    folder = Path(run_dir).parent / UNRECORDED_DIR
    try:
        folder.mkdir(exist_ok=True)
        (folder / f"{token}-{os.getpid()}-{time.time_ns()}").write_text(f"{run_dir}\n{reason}\n")
    except OSError:
        pass  # the job's FAILED line is printed anyway


def _unrecorded_notes(sweep_dir: str | Path, token: str) -> list[Path]:
    """The notes this sweep's jobs left under ``.unrecorded/`` (:func:`note_unrecorded_failure`)."""
    return sorted((Path(sweep_dir) / UNRECORDED_DIR).glob(f"{token}-*"))


def unrecorded_reasons(sweep_dir: str | Path, token: str) -> list[str]:
    """The reasons (``Type: first line``) this sweep's jobs left under ``.unrecorded/`` when they failed without a
    record of their own; ``""`` for a note that cannot be read."""
    reasons = []
    for path in _unrecorded_notes(sweep_dir, token):
        try:
            lines = path.read_text().splitlines()
        except OSError:
            lines = []
        reasons.append(lines[1] if len(lines) > 1 else "")
    return reasons


_UNRECORDED_HINTS = {
    "ConfigError": "refused before any work; the fix is named above",
    "FileExistsError": "another process's record was in their directory: give each sweep its own hydra.sweep.dir",
}


def _unrecorded_clause(count: int, reasons: Sequence[str]) -> str:
    """``; N failed without a record of their own (...)``, by kind of error, each with what it means."""
    if not count:
        return ""
    kinds = Counter(reason.split(":", 1)[0] or "unknown" for reason in reasons)
    parts = [f"{n} {kind}: {_UNRECORDED_HINTS.get(kind, 'the reason is above')}" for kind, n in sorted(kinds.items())]
    return f"; {count} failed without a record of their own ({'; '.join(parts) or 'the reasons are above'})"


def sweep_statuses(sweep_dir: str | Path, token: str | None = None) -> Counter:
    """How many runs of a sweep directory have a record, by status (unreadable records count as ``unreadable``).
    ``token``: only the records of that sweep (their provenance's ``sweep_token``), plus its jobs that failed without
    a record of their own (``unrecorded``); an unreadable record is nobody's then."""
    counts: Counter = Counter()
    for path in results.record_paths([sweep_dir]):
        try:
            record = results.read_record(path)
        except results.BadRecord:
            if token is None:
                counts["unreadable"] += 1
            continue
        if token is None or (record.get("provenance") or {}).get("sweep_token") == token:
            counts[record["status"]] += 1
    if token:
        counts["unrecorded"] += len(_unrecorded_notes(sweep_dir, token))
    return +counts


def sweep_failed() -> bool:
    """Whether a sweep run in this process had a failed job (``run.py`` then exits with status 1)."""
    return bool(_FAILED)


def sweep_summary(counts: Counter, total: int, seconds: float, sweep_dir: Path | None,
                  unrecorded_why: Sequence[str] = ()) -> str:
    """The sweep's one closing line: how many runs it recorded (by status), how many failed without a record (by
    kind of error, from ``unrecorded_why``), and how many it skipped because they were recorded before. A sweep
    that skipped everything says so, and nothing else."""
    unrecorded = counts["unrecorded"]
    recorded = sum(counts.values()) - unrecorded
    skipped = max(total - recorded - unrecorded, 0)
    lost = _unrecorded_clause(unrecorded, unrecorded_why)
    if recorded == 0 and total and not unrecorded:
        return (f"[hardlinear] sweep finished in {seconds:.0f} s: all {total} runs were already recorded; nothing ran "
                "(rerun=true runs them again)")
    by_status = ", ".join(f"{s} {counts[s]}" for s in (*results.STATUSES, "unreadable") if counts[s]) or "none"
    return (f"[hardlinear] sweep finished in {seconds:.0f} s: {recorded} of {total or '?'} runs recorded in {sweep_dir} "
            f"({by_status})" + lost + (f"; {skipped} skipped, already recorded before (rerun=true runs them again)" if skipped else ""))


def duration(seconds: float) -> str:
    """``42 s``, ``12 min``, ``3.4 h``: a wall time as a person reads it in a log line."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def time_left(elapsed: float, done: int, total: int, ran: dict[str, list[float]] | None = None,
              coming: Sequence[str] = ()) -> str:
    """``"; 2 of 6 done in 4 min, about 8 min left"``: what the remaining runs will take. With ``ran`` (seconds of
    each run that ran, by method) and ``coming`` (the method of each run still to come, ``job_methods``): each
    coming run at its method's mean, a method not seen yet at the mean of all that ran; runs skipped as already
    recorded count nothing. Without them (parallel launchers): the mean pace of the finished runs, which a sweep of
    methods of different cost (E2ELR's seconds before the proposed method's minutes) or skipped runs make wrong.
    ``""`` before the first run finishes or when the total is not known."""
    if done <= 0 or total <= 0:
        return ""
    so_far = f"; {done} of {total} done in {duration(elapsed)}"
    if done >= total:
        return so_far
    every = [t for times in (ran or {}).values() for t in times]
    if every and len(coming) == total - done:
        mean = sum(every) / len(every)
        left = sum(sum(ran[m]) / len(ran[m]) if ran.get(m) else mean for m in coming)
    else:
        left = (total - done) * elapsed / done
    return so_far + f", about {duration(left)} left"


def job_methods(overrides: list[str]) -> list[str]:
    """The ``method`` of each job of a sweep in the basic sweeper's order (the product of the overrides' values, the
    first override varying slowest, a key given twice taking its last place); ``[]`` when no override names the
    method or the overrides cannot be read."""
    import itertools

    try:
        lists: dict[str, list[str]] = {}
        for o in OverridesParser.create().parse_overrides(overrides):
            key = o.get_key_element()
            lists.pop(key, None)
            lists[key] = list(o.sweep_string_iterator()) if o.is_sweep_override() else [o.get_value_element_as_str()]
    except Exception:  # noqa: BLE001 - an override the parser does not know: no per-method estimate
        return []
    if "method" not in lists:
        return []
    at = list(lists).index("method")
    return [combo[at] for combo in itertools.product(*lists.values())]


SHOWN_FIRST = ("problem", "method", "seed")


def run_line(number: int, total: int, choices: dict[str, Any], seed: Any, overrides: list[str], eta: str = "") -> str:
    """The ``[run i/N]`` line before a job: its problem, method and seed, then every other override of the job
    (``method.refine=dr``, ``trainer=fast``), so two runs of a sweep never print the same line."""
    others = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") not in SHOWN_FIRST]
    head = f"[run {number}/{total or '?'}] problem={choices.get('problem')} method={choices.get('method')} seed={seed}"
    return " ".join([head, *others]) + eta


def remove_empty_sweep_dir(sweep_dir: Path | None) -> None:
    """A sweep directory left with nothing but Hydra's ``multirun.yaml`` (every run skipped) is removed."""
    import shutil

    try:
        if sweep_dir is not None and sweep_dir.is_dir() and {p.name for p in sweep_dir.iterdir()} <= {"multirun.yaml"}:
            shutil.rmtree(sweep_dir)
    except OSError:
        pass


class SweepProgress(Callback):
    """Prints ``[run i/N]`` before each job (basic launcher), a bar of finished runs, and a summary at the end."""

    POLL_S = 2.0

    def __init__(self) -> None:
        self.token = ""
        self.total = 0
        self.done = 0
        self.t0 = 0.0
        self.methods: list[str] = []  # each job's method, in order (basic launcher: the per-method estimate)
        self.ran: dict[str, list[float]] = {}  # seconds of each job that ran (not skipped), by method
        self._job: tuple[str, float] | None = None
        self.bar: Any = None
        self.sweep_dir: Path | None = None
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        # Parallel launchers pickle the callbacks into each job; the bar and the poller stay with the parent.
        return {**self.__dict__, "bar": None, "_stop": None, "_thread": None, "_lock": None, "_stdout": None}

    # --- one clean bar in a terminal: every other line goes through tqdm.write, above it --------------------------
    _stdout: Any = None

    def _route_output(self) -> None:
        """Send ``print`` and the log handlers that write to the terminal's stdout through ``tqdm.write``, which
        clears the bar, writes the line and draws the bar again (Hydra's ``[HYDRA] #3 : ...`` lines and the runs'
        own lines overwrote it). Hydra configures logging again for every job, so this runs at each job start."""
        from tqdm.contrib import DummyTqdmFile

        if self._stdout is None:
            self._stdout = sys.stdout
            sys.stdout = DummyTqdmFile(self._stdout)
        loggers = [logging.getLogger()] + [lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)]
        for lg in loggers:
            for handler in lg.handlers:
                if type(handler) is logging.StreamHandler and handler.stream in (self._stdout, sys.__stdout__):
                    handler.setStream(sys.stdout)

    def _restore_output(self) -> None:
        if self._stdout is not None:
            sys.stdout, self._stdout = self._stdout, None
            for lg in [logging.getLogger()] + [v for v in logging.Logger.manager.loggerDict.values() if isinstance(v, logging.Logger)]:
                for handler in lg.handlers:
                    if type(handler) is logging.StreamHandler and getattr(handler.stream, "_wrapped", None) is not None:
                        handler.setStream(handler.stream._wrapped)

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from tqdm.auto import tqdm

        try:
            self.total = count_sweep(sweep_overrides(config))
        except Exception:  # an override syntax the counter does not know: no total, still a bar
            self.total = 0
        self.methods = job_methods(sweep_overrides(config))
        if len(self.methods) != self.total:
            self.methods = []
        self.t0 = time.perf_counter()
        self.token = os.environ[SWEEP_TOKEN_ENV] = f"{uuid.uuid4().hex}"  # before any job: workers inherit it
        self.sweep_dir = Path(str(config.hydra.sweep.dir))
        # disable=None: no bar when the output is not a terminal; the poller prints one line per run instead
        self.bar = tqdm(total=self.total or None, desc="sweep", unit="run", position=1, leave=True, disable=None)
        if not self.bar.disable:
            self._route_output()
        launcher = str(config.hydra.launcher.get("_target_", "")) if config.hydra.get("launcher") else ""
        if launcher and not launcher.endswith("BasicLauncher"):  # jobs in other processes: follow their records
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._poll, name="sweep-progress", daemon=True)
            self._thread.start()

    def _poll(self) -> None:
        """Parallel launchers: follow the records appearing in the sweep directory."""
        while self._stop is not None and not self._stop.wait(self.POLL_S):
            self._advance(sum(sweep_statuses(self.sweep_dir, self.token).values()))

    def _advance(self, finished: int) -> None:
        with self._lock:
            if self.bar is None or finished <= self.done:
                return
            self.bar.update(finished - self.done)
            self.done = finished
            if self.bar.disable:
                print(f"[sweep] {self.done}/{self.total or '?'} runs done" + self._eta(), flush=True)

    def _eta(self) -> str:
        coming = self.methods[self.done:] if self.methods and self.ran else ()
        return time_left(time.perf_counter() - self.t0, self.done, self.total, self.ran, coming)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if self.bar is None:
            return
        if not self.bar.disable:
            self._route_output()
        eta = self._eta()
        self._job = (str(config.hydra.runtime.choices.get("method", "")), time.perf_counter())
        line = run_line(self.done + 1, self.total, dict(config.hydra.runtime.choices), config.get("seed"),
                        list(config.hydra.overrides.task), eta)
        print("\n" + line, flush=True)

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        if self.bar is None:
            return
        if self._job is not None and (Path(str(config.hydra.runtime.output_dir)) / results.RECORD_FILE).is_file():
            method, began = self._job  # it ran (a skipped run writes no record): its time counts for its method
            self.ran.setdefault(method, []).append(time.perf_counter() - began)
        self._job = None
        self._advance(self.done + 1)  # basic launcher: counts already-recorded skips too

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.bar is None:
            return
        if self._stop is not None:
            self._stop.set()
        counts = sweep_statuses(self.sweep_dir, self.token)
        os.environ.pop(SWEEP_TOKEN_ENV, None)
        self._advance(sum(counts.values()))
        self.bar.close()
        self._restore_output()
        why = unrecorded_reasons(self.sweep_dir, self.token) if counts["unrecorded"] else []
        print(sweep_summary(counts, self.total, time.perf_counter() - self.t0, self.sweep_dir, why), flush=True)
        failed = counts["failed"] + counts["unrecorded"]
        if failed:
            _FAILED.append(str(self.sweep_dir))
            print(f"[hardlinear] {failed} run(s) of this sweep failed (their reasons are above, and in their records "
                  "where they have one); exit status 1", file=sys.stderr, flush=True)
        remove_empty_sweep_dir(self.sweep_dir)
