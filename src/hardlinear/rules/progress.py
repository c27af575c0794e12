"""Progress of a rule solve from its first seconds: a heartbeat that any solver can feed.

A rule solve can run for minutes inside one native call (a Clarabel factorisation, HiGHS's IPX) where no
Python line runs: the only way to report from inside it is a second thread. :class:`SolveProgress` starts a
daemon thread that logs, every ``interval`` seconds at INFO, the solver's name, the elapsed time, the
process's resident and peak memory and the solver's last reported status (e.g. Clarabel's iteration and
gap, fed from its per-iteration callback through :func:`report`). A user who sees nothing for a minute knows
the solve is not dead, how much memory it holds, and whether the iterations move.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from pathlib import Path

log = logging.getLogger("hardlinear.rules.progress")

# seconds between heartbeat lines: short enough that the first one comes in the solve's first seconds
HEARTBEAT_S = 5.0
# seconds between two logged Clarabel iteration lines (each iteration feeds the heartbeat regardless)
ITERATION_LOG_S = 5.0

_current: contextvars.ContextVar[SolveProgress | None] = contextvars.ContextVar("rule_solve_progress", default=None)


def memory_mb() -> tuple[float | None, float | None]:
    """``(resident, peak resident)`` memory of this process in MB (Linux ``/proc``; None elsewhere)."""
    try:
        fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    except OSError:
        return None, None

    def mb(key: str) -> float | None:
        value = fields.get(key)
        return int(value.split()[0]) / 1024 if value else None

    return mb("VmRSS"), mb("VmHWM")


class SolveProgress:
    """Context manager: a start line, a heartbeat every ``interval`` seconds, an end line, all at INFO."""

    def __init__(self, solver: str, what: str = "", interval: float | None = None, logger: logging.Logger = log) -> None:
        interval = HEARTBEAT_S if interval is None else interval
        if interval <= 0:
            raise ValueError(f"the heartbeat interval must be positive; got {interval}")
        self.solver, self.what, self.interval, self.log = solver, what, interval, logger
        self.status = "started"
        self.beats = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._token: contextvars.Token | None = None
        self._start = 0.0

    def update(self, status: str) -> None:
        """The solver's latest status (one string; read by the heartbeat thread, so a plain assignment)."""
        self.status = status

    def elapsed(self) -> float:
        return time.perf_counter() - self._start

    def _line(self, prefix: str) -> str:
        rss, peak = memory_mb()
        memory = f"RSS {rss:.0f} MB (peak {peak:.0f} MB)" if rss is not None else "RSS n/a"
        return f"rule solver {self.solver}{' ' + self.what if self.what else ''}: {prefix} {self.elapsed():.1f} s, {memory}, {self.status}"

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            self.beats += 1
            self.log.info(self._line("running"))

    def __enter__(self) -> SolveProgress:
        self._start = time.perf_counter()
        self._token = _current.set(self)
        self.log.info(self._line("start,"))
        self._thread = threading.Thread(target=self._beat, name=f"rule-solve-heartbeat-{self.solver}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._token is not None:
            _current.reset(self._token)
        last = "" if self.status == "started" else f" (last: {self.status})"
        self.status = ("failed: " + exc_type.__name__ if exc_type else "done") + last
        self.log.info(self._line("finished after"))


def report(status: str) -> None:
    """Feed the running solve's heartbeat (a no-op outside :class:`SolveProgress`)."""
    progress = _current.get()
    if progress is not None:
        progress.update(status)


def clarabel_callback(every_s: float | None = None):
    """A Clarabel termination callback that never terminates: it reports each iteration's gap and residuals to
    the heartbeat and logs an iteration line at most every ``every_s`` seconds (so a fast solve stays quiet)."""
    every_s = ITERATION_LOG_S if every_s is None else every_s
    last = [time.perf_counter()]

    def callback(info) -> bool:
        status = (
            f"Clarabel iteration {info.iterations}: primal {info.cost_primal:.6g}, gap {info.gap_rel:.2e}, "
            f"residuals {info.res_primal:.1e}/{info.res_dual:.1e}"
        )
        report(status)
        now = time.perf_counter()
        if now - last[0] >= every_s:
            last[0] = now
            log.info("rule solver clarabel: %s", status)
        return False

    return callback
