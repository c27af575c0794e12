"""Faults: what happens when things go wrong offline, mid-run or in the caches.

* an infeasible reference solve: a one-line error naming the problem, nothing left in the dataset cache;
* a run killed with SIGKILL mid-training: no record, no metrics.json; the same command then records one;
* a NaN or infinite loss: TrainingDiverged naming the epoch and the best checkpoint so far; the run is recorded
  ``diverged`` with that reason (and resume does not redo it);
* decision-rule caches beyond test_decision_rules (truncated / edited / garbage LP rule): another problem's
  valid file under this name, a truncated SDP rule, a temp file left by a killed write;
* a missing gurobipy and a licence that refuses the model: one SKIPPED line, a ``skipped`` record, no metrics
  (test_baselines checks that SolverUnavailable is raised; here, what the run makes of it).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from hardlinear.constraints.family import JointlyLinearFamily
from hardlinear.harness import results
from hardlinear.harness import runner as harness
from hardlinear.harness.loggers import make_loggers
from hardlinear.methods.base import Context
from hardlinear.methods.penalty import Penalty
from hardlinear.problems import Portfolio, build_problem
from hardlinear.problems.base import Problem
from hardlinear.problems.datasets import build_dataset
from hardlinear.rules import solve_decision_rule
from hardlinear.solvers import SolverError
from hardlinear.train.trainer import TrainerConfig, TrainingDiverged, train

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
SMALL_DATA = ["progress=false", "data.val_size=16", "data.test_size=16", "eval.throughput_batch=64", "eval.warmup=1"]


def files_under(path: Path) -> list[Path]:
    """The files under ``path``, less the empty lock files that let one process build a cached set at a time."""
    return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix != ".lock") if path.exists() else []


def compose_cfg(tmp_path: Path, *overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(
            config_name="config",
            overrides=[*SMALL_DATA, f"cache_dir={tmp_path / 'cache'}", f"results_dir={tmp_path}", *overrides],
        )


# --- (a) offline: an infeasible reference solve ---------------------------------------------------------------
def starved(name: str = "dcopf_14") -> Problem:
    """``name`` with every constant bound cut to 1 %: generation cannot meet the load at any input."""
    base = build_problem(name)
    c = base.compact
    B_ineq = c.B_ineq.copy()
    B_ineq[:, 0] *= 0.01
    family = JointlyLinearFamily(box=c.box, G=c.G, B_eq=c.B_eq, H=c.H, B_ineq=B_ineq)
    return Problem(family, base.objective_data, "lp", "standard", f"{name}_starved")


@pytest.mark.parametrize("solver", ["highs", "clarabel"])
def test_infeasible_reference_solve_is_one_clear_line_and_leaves_no_cache(tmp_path, solver):
    problem = starved()
    cache = tmp_path / "cache"
    with pytest.raises(SolverError) as info:
        build_dataset(problem, "test", 4, seed=0, solver=solver, cache_dir=cache, progress=False)
    message = str(info.value)
    assert "\n" not in message
    assert re.search(rf"{solver} did not solve 4 of 4 instances of dcopf_14_starved to optimality", message)
    assert "status" in message and "instance 0" in message
    assert files_under(cache) == []  # no dataset, no half-written temp file

    # the healthy problem builds into the same directory afterwards, and only its file is there
    build_dataset(build_problem("dcopf_14"), "test", 4, seed=0, solver=solver, cache_dir=cache, progress=False)
    assert [p.suffix for p in files_under(cache)] == [".npz"]


# --- (b) a run killed mid-training ---------------------------------------------------------------------------
def test_sigkill_mid_training_records_nothing_and_the_rerun_records_one_row(tmp_path):
    run_dir = tmp_path / "run"
    cmd = [
        sys.executable, "run.py", "problem=dcopf_14", "method=penalty", "trainer=fast", "trainer.epochs=400",
        "trainer.pretrain_epochs=0", *SMALL_DATA, f"cache_dir={tmp_path / 'cache'}", f"results_dir={tmp_path}",
        f"hydra.run.dir={run_dir}",
        # cheaper epochs (a few seconds of training in all): the validation loss is still logged every epoch
        "trainer.batches_per_epoch=2", "trainer.val_every=100", "network.hidden=32",
    ]
    epochs = run_dir / "epochs.csv"

    def logged() -> int:
        return max(0, len(epochs.read_text().splitlines()) - 1) if epochs.exists() else 0

    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 180
        while logged() < 3 and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before it could be killed"
        assert logged() >= 3, "training did not start in time"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole process group, mid-training
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert 3 <= logged() < 400  # killed mid-training
    assert not (run_dir / "metrics.json").exists() and not (run_dir / "record.json").exists()
    assert results.load_records(tmp_path).empty  # a kill is neither a result nor a skip

    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-2000:]
    table = results.load_records(tmp_path)
    assert len(table) == 1 and table["status"].iloc[0] == "ok" and table["run_dir"].iloc[0] == str(run_dir)
    assert (run_dir / "metrics.json").is_file()
    logged_epochs = [int(line.split(",")[0]) for line in epochs.read_text().splitlines()[1:]]
    assert logged_epochs == list(range(400))  # the killed run's log was replaced, not appended to
    assert not [p for p in files_under(tmp_path) if p.name.endswith(".tmp")]


# --- (c) a NaN loss ----------------------------------------------------------------------------------------------
class NaNFrom(Penalty):
    """The penalty method whose loss becomes NaN from epoch ``bad_epoch`` on (as a diverging run's does)."""

    def __init__(self, bad_epoch: int) -> None:
        super().__init__(name="nan_from")
        self.bad_epoch, self.epoch = bad_epoch, 0

    def loss(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        loss = super().loss(xi, y)
        return loss * float("nan") if self.epoch >= self.bad_epoch else loss

    def after_epoch(self, epoch: int) -> dict[str, float]:
        self.epoch = epoch + 1
        return {}


@pytest.fixture(scope="module")
def dcopf14_val(tmp_path_factory):
    problem = build_problem("dcopf_14")
    return problem, build_dataset(problem, "val", 8, seed=0, cache_dir=tmp_path_factory.mktemp("val"), progress=False)


@pytest.mark.parametrize("bad_epoch", [3, 0])
def test_nan_loss_raises_training_diverged_naming_epoch_and_checkpoint(tmp_path, dcopf14_val, bad_epoch):
    problem, val = dcopf14_val
    ctx = Context(cache_dir=str(tmp_path), progress=False, network={"hidden": 16, "layers": 1, "batch_norm": True})
    method = NaNFrom(bad_epoch)
    torch.manual_seed(0)
    method.setup(problem, ctx)
    cfg = TrainerConfig(epochs=8, pretrain_epochs=0, batches_per_epoch=2, batch_size=16, lr=1e-3, progress=False)
    loggers = make_loggers(["csv"], str(tmp_path / "run"))
    with pytest.raises(TrainingDiverged) as info:
        train(method, problem, val, cfg, ctx, loggers=loggers)
    message = str(info.value)
    assert f"nan_from: loss is nan at epoch {bad_epoch} (train)" in message
    if bad_epoch == 0:
        assert "no checkpoint was kept yet" in message
        return
    # the checkpoint named is the one with the lowest validation loss among the good epochs
    import pandas as pd

    log = pd.read_csv(tmp_path / "run" / "epochs.csv")
    assert log["epoch"].tolist() == list(range(bad_epoch))
    best = int(log.loc[log["val/loss"].idxmin(), "epoch"])
    assert f"the best checkpoint so far is from epoch {best}" in message


def test_diverging_runs_are_recorded_as_diverged(tmp_path, capfd):
    """A learning rate of 1e30 overflows the network in its first steps: TrainingDiverged, recorded as
    ``diverged`` with the reason, loudly; resume counts it as done, and rerun=true runs it again."""
    cfg = compose_cfg(tmp_path, "problem=dcopf_14", "method=penalty", "trainer=fast", "trainer.lr=1e30")
    row = harness.run(cfg, tmp_path / "run")
    assert row["status"] == "diverged"
    table = results.load_records(tmp_path)
    assert table["status"].tolist() == ["diverged"] and table["reason"].iloc[0].startswith("TrainingDiverged: penalty: loss is")
    assert "DIVERGED dcopf_14/penalty" in capfd.readouterr().err
    assert harness.run_in_sweep(cfg, tmp_path / "sweep-run") is None  # already recorded
    assert "add rerun=true to run it again" in capfd.readouterr().out
    again = compose_cfg(tmp_path, "problem=dcopf_14", "method=penalty", "trainer=fast", "trainer.lr=1e30", "rerun=true")
    assert harness.run(again, tmp_path / "rerun")["status"] == "diverged"
    assert len(results.load_records(tmp_path, all_runs=True)) == 2


def test_huge_but_finite_metrics_are_recorded_as_diverged(tmp_path):
    """A run whose test gap exceeds eval.diverged_gap is recorded ``diverged``, never ``ok`` (the bound set low
    here so that the fast trainer's ~40 % gap crosses it)."""
    cfg = compose_cfg(tmp_path, "problem=dcopf_14", "method=penalty", "trainer=fast", "eval.diverged_gap=1e-3")
    row = harness.run(cfg, tmp_path / "run")
    assert row["status"] == "diverged"
    reason = results.load_records(tmp_path)["reason"].iloc[0]
    assert "beyond eval.diverged_gap=0.001" in reason


def test_divergence_bounds_spare_infeasible_soft_methods_and_catch_blow_ups():
    """The defaults: the paper study's worst legitimate results (a penalty run stuck infeasible at -1.6e5 %, DC3
    at penalty 0 with a violation of 2.1e3) stay ``ok``; the issue's blown-up DC3 (3.3e14 %, 6e13) does not."""
    from hardlinear.evaluation.protocol import EvalConfig, divergence_reason

    cfg = EvalConfig()
    legit = {"test/gap_mean": -162586.25, "test/gap_worst": -117688.8, "test/eq_viol_worst": 53.2, "test/ineq_viol_worst": 2103.8}
    assert divergence_reason(legit, cfg) is None
    blown = {"test/gap_mean": 3.3e14, "test/gap_worst": 3.3e14, "test/eq_viol_worst": 0.0, "test/ineq_viol_worst": 6e13}
    assert divergence_reason(blown, cfg) == "test gap 3.3e+14 % beyond eval.diverged_gap=1e+07"
    assert "beyond eval.diverged_viol" in divergence_reason({**legit, "test/ineq_viol_worst": 6e13}, cfg)
    assert "non-finite" in divergence_reason({**legit, "test/gap_mean": float("nan")}, cfg)


def test_a_method_that_does_not_apply_is_recorded_not_applicable(tmp_path, monkeypatch, capfd):
    """``NotApplicable`` from setup: one loud line, a ``not_applicable`` record with the reason, no metrics;
    resume does not retry it (the answer will not change)."""
    from hardlinear.methods.base import NotApplicable

    def refuse(self, problem, ctx):
        raise NotApplicable(f"{self.name} needs a box on every variable; {problem.name} has free variables")

    monkeypatch.setattr(Penalty, "setup", refuse)
    cfg = compose_cfg(tmp_path, "problem=dcopf_14", "method=penalty", "trainer=fast")
    assert harness.run(cfg, tmp_path / "run") is None
    assert "NOT APPLICABLE dcopf_14/penalty: penalty needs a box on every variable" in capfd.readouterr().err
    table = results.load_records(tmp_path)
    assert table["status"].tolist() == ["not_applicable"] and table["reason"].iloc[0].startswith("penalty needs a box")
    assert table["test/gap_mean"].isna().all()
    assert harness.run(cfg, tmp_path / "again") is None and "already recorded" in capfd.readouterr().out


# --- (d) decision-rule caches ----------------------------------------------------------------------------------
def rule_files(cache: Path) -> list[Path]:
    return sorted((cache / "decision_rules").glob("*.rule"))


def test_rule_cache_of_another_problem_is_detected_and_rebuilt(tmp_path):
    """A valid file (magic, checksum) holding another problem's rule: the fingerprint check catches it."""
    target, other = build_problem("dcopf_14"), build_problem("dcopf_14", uncertainty=0.3)
    good = solve_decision_rule(target, cache_dir=tmp_path)
    (target_file,) = rule_files(tmp_path)
    solve_decision_rule(other, cache_dir=tmp_path)
    (other_file,) = [p for p in rule_files(tmp_path) if p != target_file]
    target_file.write_bytes(other_file.read_bytes())
    with pytest.warns(UserWarning, match="fingerprint differs"):
        rebuilt = solve_decision_rule(target, cache_dir=tmp_path)
    assert not rebuilt.info["cached"] and rebuilt.t_star == pytest.approx(good.t_star, abs=1e-8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert solve_decision_rule(target, cache_dir=tmp_path).info["cached"]


def test_truncated_sdp_rule_and_a_stale_temp_file(tmp_path):
    """The portfolio's rule (quadratic slack forms) truncated: rebuilt; a temp file left by a write that was
    killed before its rename is never read as a rule."""
    problem = Portfolio(uncertainty=0.3)
    first = solve_decision_rule(problem, cache_dir=tmp_path)
    (path,) = rule_files(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 200])
    stale = path.parent / f"{path.name}killed.tmp"
    stale.write_bytes(data[: len(data) // 3])
    with pytest.warns(UserWarning, match="checksum mismatch"):
        rebuilt = solve_decision_rule(problem, cache_dir=tmp_path)
    assert not rebuilt.info["cached"] and rebuilt.quadratic is not None
    assert torch.allclose(rebuilt.quadratic, first.quadratic, atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = solve_decision_rule(problem, cache_dir=tmp_path)
    assert again.info["cached"] and torch.equal(again.quadratic, rebuilt.quadratic)
    assert rule_files(tmp_path) == [path]  # the stale temp file is not a cache entry


# --- (e) solvers that are missing or refuse the model ----------------------------------------------------------
def assert_one_skip_line(capfd, tmp_path: Path, run_dir: Path, needle: str) -> str:
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if "SKIPPED" in line]
    assert len(lines) == 1 and needle in lines[0], err[-2000:]
    assert "Traceback" not in err
    skipped = results.load_records(tmp_path)
    assert skipped["status"].tolist() == ["skipped"]
    assert "\n" not in skipped["reason"].iloc[0] and needle in skipped["reason"].iloc[0]
    assert skipped["test/gap_mean"].isna().all() and not (run_dir / "metrics.json").exists()
    return lines[0]


def test_missing_gurobipy_is_one_skip_line(tmp_path, monkeypatch, capfd):
    # gurobipy is installed here: a None entry in sys.modules is how Python reports a module that cannot be
    # imported (ImportError), i.e. exactly what a machine without gurobipy sees.
    monkeypatch.setitem(sys.modules, "gurobipy", None)
    cfg = compose_cfg(tmp_path, "problem=dcopf_14", "method=optimizer_gurobi", "trainer=fast")
    run_dir = tmp_path / "run"
    assert harness.run(cfg, run_dir) is None
    line = assert_one_skip_line(capfd, tmp_path, run_dir, "gurobipy is not installed")
    assert "pip install 'hardlinear[gurobi]'" in line


def _gurobi_licensed() -> bool:
    try:
        import gurobipy

        gurobipy.Model().dispose()
        return True
    except Exception:  # noqa: BLE001 - not installed, or no licence at all
        return False


@pytest.mark.skipif(not _gurobi_licensed(), reason="gurobipy with a (size-limited) licence is not available")
def test_gurobi_refusing_the_model_is_one_skip_line(tmp_path, capfd):
    cfg = compose_cfg(tmp_path, "problem=dcopf_118_qp", "method=optimizer_gurobi", "trainer=fast", "data.val_size=4", "data.test_size=4")
    run_dir = tmp_path / "run"
    assert harness.run(cfg, run_dir) is None
    line = assert_one_skip_line(capfd, tmp_path, run_dir, "gurobi refused the model")
    assert "size-limited" in line and "dcopf_118/optimizer gurobi" in line
