"""``trainer.keep``: the kept weights are the final ones (``last``, as Pinet's e662b15 script tests) or those of the
lowest validation loss (``best``, the default); the run's validation metrics are those of the kept weights."""

import pytest
import torch
from test_fixed_training_set import problem_with_train

from hardlinear.data import build_dataset
from hardlinear.methods.base import Context
from hardlinear.methods.penalty import Penalty
from hardlinear.train.trainer import TrainerConfig, train


def _fit(tmp_path, keep):
    torch.manual_seed(0)
    p, _ = problem_with_train(40)
    ctx = Context(seed=0, progress=False, network={"hidden": 16, "layers": 1, "batch_norm": False})
    method = Penalty(penalty=10.0)
    method.setup(p, ctx)
    val = build_dataset(p, "val", 4, seed=0, cache_dir=tmp_path, progress=False)
    cfg = TrainerConfig(epochs=6, pretrain_epochs=0, batch_size=8, batches_per_epoch=4, lr=0.3, val_every=1,
                        progress=False, keep=keep)  # fmt: skip
    return train(method, p, val, cfg, ctx)


def test_last_keeps_the_final_weights_and_best_the_lowest_loss(tmp_path):
    last, best = _fit(tmp_path, "last"), _fit(tmp_path, "best")
    assert [h["train/loss"] for h in last.history] == [h["train/loss"] for h in best.history]  # same training
    assert best.best_epoch != len(best.history) - 1, "lr 0.3 was meant to make the last epoch not the best one"
    assert last.val_metrics["val/gap_mean"] == pytest.approx(last.history[-1]["val/gap_mean"], rel=1e-12)
    assert best.val_metrics["val/gap_mean"] == pytest.approx(best.history[best.best_epoch]["val/gap_mean"], rel=1e-12)


def test_keep_is_checked():
    with pytest.raises(ValueError, match="keep must be"):
        TrainerConfig(keep="newest")
