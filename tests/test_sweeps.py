"""Sweeps end to end through run.py: resume after a kill, and the submitit launcher (local executor)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from hardlinear.harness import results

ROOT = Path(__file__).resolve().parents[1]
# A cheap method that needs no decision rule: the soft-penalty network, smoke-trained.
BASE = ["problem=dcopf_14", "method=penalty", "trainer=fast", "eval.throughput_batch=256", "progress=false", "data.val_size=16", "data.test_size=16"]


def sweep_cmd(tmp_path: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "run.py", "-m", *BASE,
        f"results_dir={tmp_path}", f"cache_dir={tmp_path / 'cache'}",
        f"hydra.sweep.dir={tmp_path / 'multirun'}", *extra,
    ]


def rows(tmp_path: Path) -> pd.DataFrame:
    """Every record of the sweep (all runs, so that a run recorded twice would show)."""
    return results.load_records(tmp_path, all_runs=True, quiet=True)


def test_killed_sweep_resumes_without_duplicates_or_losses(tmp_path):
    seeds = "seed=0,1,2,3"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(sweep_cmd(tmp_path, seeds), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 240
    while time.time() < deadline and len(rows(tmp_path)) < 2 and proc.poll() is None:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # mid-sweep, typically inside the third run
    proc.wait()
    before = rows(tmp_path)
    assert 2 <= len(before) < 4, f"the kill came too late or too early: {len(before)} rows"
    done = subprocess.run(sweep_cmd(tmp_path, seeds), cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-2000:]
    after = rows(tmp_path)
    assert sorted(after["seed"].tolist()) == [0, 1, 2, 3]
    assert after["identity"].is_unique
    assert "already recorded" in done.stdout and "rerun=true" in done.stdout  # skipped, not redone; the override named
    assert set(before["identity"]) <= set(after["identity"])


@pytest.mark.parametrize("launcher", ["submitit_local", pytest.param("joblib", marks=pytest.mark.slow)])
def test_parallel_launchers_record_every_run(tmp_path, launcher):
    extra = ["seed=0,1", f"hydra/launcher={launcher}"]
    extra += ["hydra.launcher.timeout_min=10"] if launcher == "submitit_local" else ["hydra.launcher.n_jobs=2"]
    done = subprocess.run(sweep_cmd(tmp_path, *extra), cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    got = rows(tmp_path)
    assert sorted(got["seed"].tolist()) == [0, 1]
    assert (got["status"] == "ok").all()
    # the parent's summary counts the records the parallel jobs wrote
    assert "sweep finished" in done.stdout and "2 of 2 runs recorded" in done.stdout and "ok 2" in done.stdout


def test_sweep_count_lets_the_command_line_win_over_the_experiment():
    """`+experiment=table_lp seed=0` runs 5 problems x 8 methods x 1 seed, not x 3: the bar's total says so."""
    from omegaconf import OmegaConf

    from hardlinear.harness.sweep import count_sweep, sweep_overrides

    config = OmegaConf.create(
        {"hydra": {"overrides": {"task": ["+experiment=table_lp", "seed=0"]},
                   "sweeper": {"params": {"problem": "a,b,c,d,e", "method": "m1,m2", "seed": "0,1,2"}}}}
    )
    assert count_sweep(sweep_overrides(config)) == 10
    config.hydra.overrides.task = ["+experiment=table_lp"]
    assert count_sweep(sweep_overrides(config)) == 30


def test_a_sweep_counts_only_its_own_records_and_fails_when_a_job_failed(tmp_path):
    """Issue 43: a second sweep forced into the first one's folder (rerun=true) finds another process's record in
    every run directory: each job fails with FileExistsError, and its summary must say so and exit non-zero, not
    count the first sweep's records as its own ("2 of 2 runs recorded (ok 2)", exit 0)."""
    first = subprocess.run(sweep_cmd(tmp_path, "seed=0,1"), cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert first.returncode == 0 and "2 of 2 runs recorded" in first.stdout and "ok 2" in first.stdout, first.stderr[-2000:]
    second = subprocess.run(sweep_cmd(tmp_path, "seed=0,1", "rerun=true"), cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert second.returncode == 1, second.stdout[-2000:]
    assert "FileExistsError" in second.stderr and "2 run(s) of this sweep failed" in second.stderr
    assert "0 of 2 runs recorded" in second.stdout and "2 failed without a record of their own" in second.stdout
    assert "ok 2" not in second.stdout
    assert len(rows(tmp_path)) == 2  # the first sweep's records, untouched


def test_a_job_refused_for_its_config_is_summed_up_as_such(tmp_path):
    """A job whose config is refused before any work has no record; the summary names the kind of error, not
    the advice for another sweep's record in its folder."""
    out = subprocess.run(sweep_cmd(tmp_path, "seed=0", "trainer.epochs=-1"), cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert out.returncode == 1, out.stdout[-2000:]
    assert "ConfigError" in out.stderr
    assert "1 failed without a record of their own (1 ConfigError: refused before any work" in out.stdout
    assert "another process's record" not in out.stdout


def test_the_summary_names_each_kind_of_unrecorded_failure():
    from collections import Counter

    from hardlinear.harness.sweep import sweep_summary

    line = sweep_summary(Counter(ok=1, unrecorded=3), 4, 1.0, Path("sweep"),
                         ["ConfigError: bad", "FileExistsError: taken", "FileExistsError: taken"])
    assert "3 failed without a record of their own (1 ConfigError: refused before any work" in line
    assert "2 FileExistsError: another process's record was in their directory" in line
    assert "1 of 4 runs recorded" in line
