"""The trainer's wall-clock budget (``trainer.time_budget_s``): training stops at the first batch after it is
spent, says how far it got, and a budgeted run is a different run (its identity differs)."""

import numpy as np
import pytest
import torch
from test_fixed_training_set import problem_with_train

from hardlinear.harness.results import identity
from hardlinear.methods.base import Context
from hardlinear.methods.penalty import Penalty
from hardlinear.problems.datasets import build_dataset
from hardlinear.train.trainer import TrainerConfig, train


def _fit(tmp_path, **trainer):
    torch.manual_seed(0)  # the network's initialisation (the harness seeds it the same way per run)
    p, _ = problem_with_train(40)
    ctx = Context(seed=0, progress=False, network={"hidden": 16, "layers": 1, "batch_norm": True})
    method = Penalty(penalty=10.0)
    method.setup(p, ctx)
    val = build_dataset(p, "val", 4, seed=0, cache_dir=tmp_path, progress=False)
    cfg = TrainerConfig(epochs=3, pretrain_epochs=0, batch_size=8, batches_per_epoch=4, progress=False, **trainer)
    return train(method, p, val, cfg, ctx)


def test_a_spent_budget_stops_after_one_batch_and_says_so(tmp_path):
    fit = _fit(tmp_path, time_budget_s=1e-9)  # spent by the first batch, whatever the machine
    assert fit.budget_spent
    assert fit.epochs == pytest.approx(0.25)  # 1 of 4 batches of the first epoch
    assert len(fit.history) == 1 and fit.history[0]["train/batches"] == 1
    assert np.isfinite(fit.history[0]["train/loss"])
    assert "val/gap_mean" in fit.history[0]  # the cut epoch still gets its validation metrics
    assert fit.best_epoch == 0 and fit.val_metrics


def test_an_unspent_budget_changes_nothing(tmp_path):
    fit = _fit(tmp_path, time_budget_s=1e9)
    plain = _fit(tmp_path)
    assert not fit.budget_spent and not plain.budget_spent
    assert fit.epochs == plain.epochs == 3.0
    assert [h["train/loss"] for h in fit.history] == [h["train/loss"] for h in plain.history]


def test_a_bad_budget_is_refused_and_the_budget_is_part_of_the_identity():
    with pytest.raises(ValueError, match="time_budget_s must be > 0"):
        TrainerConfig(time_budget_s=0)
    base = {"seed": 0, "trainer": {"epochs": 300}}
    assert identity(base) != identity({"seed": 0, "trainer": {"epochs": 300, "time_budget_s": 120}})
