"""Issue 44: a sweep's log lines carry an estimate of the time left, and ``[run i/N]`` shows every override."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from hardlinear.harness.sweep import duration, job_methods, run_line, time_left

ROOT = Path(__file__).resolve().parents[1]


def test_duration_reads_as_a_person_would():
    assert [duration(s) for s in (42, 600, 3 * 3600 + 1440)] == ["42 s", "10 min", "3.4 h"]


def test_time_left_is_the_mean_pace_of_finished_runs():
    assert time_left(240.0, 2, 6) == "; 2 of 6 done in 4 min, about 8 min left"
    assert time_left(30.0, 3, 3) == "; 3 of 3 done in 30 s"  # nothing left to estimate
    assert time_left(5.0, 0, 6) == "" and time_left(5.0, 2, 0) == ""  # nothing finished, or no total


def test_time_left_takes_each_coming_run_at_its_methods_pace():
    """Issue 60 item 9: after two E2ELR runs (10 s each) and one of the proposed method (150 s), with a proposed, an
    E2ELR and an LDF run to come, the mean pace said 3 x 170 s / 3 = 170 s were left; each coming run at its method's
    pace says 150 + 10 + 56.7 s (LDF, not seen yet: the mean of every run that ran) = 217 s; a run skipped as
    already recorded (no time in ``ran``) no longer pulls the estimate down."""
    assert time_left(20.0, 2, 6) == "; 2 of 6 done in 20 s, about 40 s left"  # the mean pace, as before
    ran = {"e2elr": [10.0, 10.0], "proposed": [150.0]}
    assert time_left(170.0, 3, 6, ran, ["proposed", "e2elr", "ldf"]) == "; 3 of 6 done in 3 min, about 4 min left"  # 217 s
    assert time_left(20.0, 3, 4, {"e2elr": [10.0, 10.0]}, ["e2elr"]) == "; 3 of 4 done in 20 s, about 10 s left"  # 1 skipped
    assert time_left(20.0, 2, 6, ran, ["proposed"]) == "; 2 of 6 done in 20 s, about 40 s left"  # methods unknown: mean pace


def test_job_methods_follow_the_basic_sweepers_order():
    assert job_methods(["method=e2elr,ldf", "seed=0,1"]) == ["e2elr", "e2elr", "ldf", "ldf"]
    assert job_methods(["seed=0,1", "method=e2elr,ldf"]) == ["e2elr", "ldf", "e2elr", "ldf"]
    assert job_methods(["problem=ed", "method=proposed"]) == ["proposed"] and job_methods(["seed=0,1"]) == []


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
