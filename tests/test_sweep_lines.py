"""Issue 44: a sweep's log lines carry an estimate of the time left, and ``[run i/N]`` shows every override."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from hardlinear.harness.sweep import duration, run_line, time_left

ROOT = Path(__file__).resolve().parents[1]


def test_duration_reads_as_a_person_would():
    assert [duration(s) for s in (42, 600, 3 * 3600 + 1440)] == ["42 s", "10 min", "3.4 h"]


def test_time_left_is_the_mean_pace_of_finished_runs():
    assert time_left(240.0, 2, 6) == "; 2 of 6 done in 4 min, about 8 min left"
    assert time_left(30.0, 3, 3) == "; 3 of 3 done in 30 s"  # nothing left to estimate
    assert time_left(5.0, 0, 6) == "" and time_left(5.0, 2, 0) == ""  # nothing finished, or no total


def test_run_line_shows_every_override_once():
    line = run_line(1, 2, {"problem": "dcopf_14", "method": "proposed"}, 0,
                    ["problem=dcopf_14", "method=proposed", "seed=0", "method.refine=dr", "trainer=fast"], "; x")
    assert line == "[run 1/2] problem=dcopf_14 method=proposed seed=0 method.refine=dr trainer=fast; x"


def test_a_sweep_prints_overrides_and_time_left(tmp_path):
    cmd = [sys.executable, "run.py", "-m", "problem=dcopf_14", "method=penalty", "trainer=fast", "seed=0,1", "trainer.lr=0.002",
           "eval.throughput_batch=256", "progress=false", "data.val_size=16", "data.test_size=16",
           f"results_dir={tmp_path}", f"cache_dir={tmp_path / 'cache'}", f"hydra.sweep.dir={tmp_path / 'multirun'}"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-2000:]
    runs = [ln for ln in done.stdout.splitlines() if ln.startswith("[run ")]
    assert len(runs) == 2 and all("trainer=fast" in ln and "trainer.lr=0.002" in ln for ln in runs)
    assert "seed=1" in runs[1] and re.search(r"; 1 of 2 done in \d+ s, about \d+ s left$", runs[1])
    finished = [ln for ln in done.stdout.splitlines() if ln.startswith("[sweep] ")]
    assert re.fullmatch(r"\[sweep\] 1/2 runs done; 1 of 2 done in \d+ s, about \d+ s left", finished[0])
