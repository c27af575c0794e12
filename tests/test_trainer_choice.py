"""Issue 44 item 1: a trainer named on the command line wins over a problem_method config's schedule, and the
record and the ``done`` line say what ran; item 5: the ``done`` line and W&B's summary flag an infeasible run."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from hardlinear.evaluation.metrics import FEASIBILITY_TOL, infeasibility
from hardlinear.harness.runner import done_line
from hardlinear.harness.trainer_choice import apply_trainer_choice, named_trainer
from hardlinear.train.trainer import TrainerConfig

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"


def _composed(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
        note = apply_trainer_choice(cfg, overrides, CONF)
    return cfg, note


def test_named_trainer_reads_the_group_choice_only():
    assert named_trainer(["problem=dc3_qp", "trainer=fast"]) == "fast"
    assert named_trainer(["trainer.epochs=3", "method=fsnet"]) is None  # a key of the trainer is not a choice of one
    assert named_trainer([]) is None


def test_fast_wins_over_a_peers_schedule_and_keeps_its_tuning():
    cfg, note = _composed(["problem=dc3_qp", "method=fsnet", "trainer=fast"])
    assert cfg.trainer.epochs == 4 and cfg.trainer.pretrain_epochs == 2 and cfg.trainer.batches_per_epoch == 5
    assert "sampling" not in cfg.trainer  # FSNet's one pass over 8,334 inputs gives way to fast's 5 batches
    assert cfg.trainer.lr == 5e-4 and cfg.trainer.optimizer == "adamw"  # FSNet's tuning stays
    assert note.startswith("trainer=fast named on the command line wins over problem_method/dc3_qp_fsnet")
    assert "epochs=4 (not 500)" in note


def test_no_trainer_named_keeps_the_peers_schedule():
    cfg, note = _composed(["problem=dc3_qp", "method=fsnet"])
    assert cfg.trainer.epochs == 500 and cfg.trainer.sampling == "pass" and note == ""


def test_a_trainer_key_on_the_command_line_wins_over_both():
    cfg, note = _composed(["problem=dc3_qp", "method=dc3", "trainer=budget_120s", "trainer.epochs=7"])
    assert cfg.trainer.epochs == 7 and cfg.trainer.time_budget_s == 120 and cfg.trainer.sampling == "batches"
    assert "sampling=batches (not pass)" in note and "(not 1000)" not in note  # 7 is in both compositions: no change


def test_no_problem_method_file_means_no_change():
    cfg, note = _composed(["problem=dcopf_14", "method=proposed", "trainer=fast"])
    assert note == "" and cfg.trainer.epochs == 4


METRICS = {"test/gap_mean": 1.25, "test/gap_worst": 4.4, "test/eq_viol_worst": 1.7e-14, "test/ineq_viol_worst": 2.8e-2,
           "test/time_ms": 2.0, "train/epochs": 2.5, "train/budget_spent": 1.0, "train/time_s": 120.3}


def test_infeasibility_uses_the_tables_tolerance():
    assert infeasibility(METRICS) == f"INFEASIBLE: worst ineq. violation 2.8e-02 > {FEASIBILITY_TOL:g}"
    assert infeasibility({**METRICS, "test/ineq_viol_worst": FEASIBILITY_TOL}) == ""
    assert infeasibility({"test/eq_viol_worst": math.nan}) == ""  # nothing recorded: nothing to flag


def test_done_line_flags_infeasible_and_says_what_ran():
    line = done_line("p/m", METRICS, TrainerConfig(epochs=300, pretrain_epochs=0, time_budget_s=120), "budget_120s")
    assert "ineq 2.8e-02 INFEASIBLE: worst ineq. violation 2.8e-02 > 1e-06" in line
    assert "stopped on its budget after 2 of 300 epochs (trainer budget_120s, budget 120 s spent, 120.3 s)" in line
    assert "2.5" not in line  # the epochs it completed, not the cut epoch's share (issue 60 item 9)
    feasible = done_line("p/m", {**METRICS, "test/ineq_viol_worst": 0.0}, TrainerConfig(epochs=4, pretrain_epochs=2), "fast")
    assert "INFEASIBLE" not in feasible and "budget" not in feasible
    assert done_line("p/m", METRICS, TrainerConfig(), "fast", trainable=False).endswith("not trained (trainer fast)")


def test_run_py_with_trainer_fast_runs_fast_and_says_so(tmp_path):
    """End to end: Pinet's problem_method config asks 50 epochs of one pass; ``trainer=fast`` runs 4, the record
    says 4, the done line says it, and W&B's offline summary carries the feasibility verdict."""
    pytest.importorskip("wandb")
    from test_loggers import _items, finished_records

    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DIR": str(tmp_path / "wb"),
           "WANDB_CACHE_DIR": str(tmp_path / "wbc"), "WANDB_CONFIG_DIR": str(tmp_path / "wbcfg"), "WANDB_DATA_DIR": str(tmp_path / "wbd")}
    env.pop("WANDB_API_KEY", None)
    for sub in ("wb", "wbc", "wbcfg", "wbd"):
        (tmp_path / sub).mkdir()
    cmd = [sys.executable, "run.py", "problem=dc3_qp", "method=pinet", "trainer=fast", "logger=wandb", "progress=false",
           f"results_dir={tmp_path}", f"cache_dir={tmp_path / 'cache'}", "eval.throughput_batch=64", "eval.time_instances=5"]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "trainer=fast named on the command line wins over problem_method/dc3_qp_pinet: epochs=4 (not 50)" in done.stdout
    (done_out,) = [ln for ln in done.stdout.splitlines() if ln.startswith("[hardlinear] done ")]
    assert "trained 4 of 4 epochs (trainer fast" in done_out
    (record_file,) = tmp_path.glob("runs/dc3_qp/pinet/*/record.json")
    record = json.loads(record_file.read_text())
    assert record["config"]["trainer"]["epochs"] == 4 and record["config"]["trainer"]["name"] == "fast"
    assert record["row"]["train/epochs"] == 4
    flag = infeasibility(record["row"])
    assert (" INFEASIBLE: " in done_out) == bool(flag)
    (wandb_file,) = record_file.parent.glob("wandb/offline-run-*/run-*.wandb")
    summary = {}
    for r in finished_records(wandb_file):
        if r.WhichOneof("record_type") == "summary":
            summary.update(_items(r.summary.update))
    assert summary["feasible"] is (not flag) and summary["infeasible"] == flag


def test_a_schedule_that_cannot_be_separated_is_refused_in_one_line():
    from hardlinear.harness.schemas import ConfigError

    overrides = ["problem=dc3_qp", "method=fsnet", "trainer=fast"]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
        with pytest.raises(ConfigError, match=r"trainer=gone was named on the command line, but .* name the schedule instead"):
            apply_trainer_choice(cfg, ["problem=dc3_qp", "method=fsnet", "trainer=gone"], CONF)  # Hydra cannot compose it
