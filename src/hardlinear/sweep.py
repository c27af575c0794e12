"""Sweep bookkeeping: which run a multirun is on, an overall progress bar, and what was skipped.

Registered as a Hydra callback in ``conf/config.yaml``. With the basic launcher jobs run in this process one
after the other, so the callback sees every start and end; with parallel launchers (joblib, submitit) each
job still prints its own ``[hardlinear] ...`` line and the store records skips.
"""

from __future__ import annotations

import math
import time
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig


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


class SweepProgress(Callback):
    """Prints ``[run i/N]`` before each job and a summary (done, skipped, failed, time) at the end."""

    def __init__(self) -> None:
        self.total = 0
        self.done = 0
        self.t0 = 0.0
        self.bar: Any = None

    def __getstate__(self) -> dict:
        # Parallel launchers pickle the callbacks into each job; the bar stays with the parent process.
        return {**self.__dict__, "bar": None}

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from tqdm.auto import tqdm

        try:
            self.total = count_sweep(sweep_overrides(config))
        except Exception:  # an override syntax the counter does not know: no total, still a bar
            self.total = 0
        self.t0 = time.perf_counter()
        self.bar = tqdm(total=self.total or None, desc="sweep", unit="run", position=1, leave=True)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if self.bar is None:
            return
        choices = config.hydra.runtime.choices
        print(
            f"\n[run {self.done + 1}/{self.total or '?'}] problem={choices.get('problem')} method={choices.get('method')} "
            f"seed={config.get('seed')}",
            flush=True,
        )

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        if self.bar is None:
            return
        self.done += 1
        self.bar.update(1)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.bar is None:
            return
        self.bar.close()
        print(f"[hardlinear] sweep finished: {self.done} runs in {time.perf_counter() - self.t0:.0f} s; "
              f"skipped or failed runs are listed in the results' .skipped.csv", flush=True)
