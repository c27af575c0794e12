"""``trainer.keep``: the kept weights are the final ones (``last``, as Pinet's e662b15 script tests) or those of the
lowest validation loss (``best``, the default); the run's validation metrics are those of the kept weights."""

import pytest
from test_fixed_training_set import fit_penalty

from hardlinear.train.trainer import TrainerConfig


def _fit(tmp_path, keep):
    return fit_penalty(tmp_path, epochs=6, batches_per_epoch=4, lr=0.3, val_every=1, keep=keep)


def test_last_keeps_the_final_weights_and_best_the_lowest_loss(tmp_path):
    last, best = _fit(tmp_path, "last"), _fit(tmp_path, "best")
    assert [h["train/loss"] for h in last.history] == [h["train/loss"] for h in best.history]  # same training
    assert best.best_epoch != len(best.history) - 1, "lr 0.3 was meant to make the last epoch not the best one"
    assert last.val_metrics["val/gap_mean"] == pytest.approx(last.history[-1]["val/gap_mean"], rel=1e-12)
    assert best.val_metrics["val/gap_mean"] == pytest.approx(best.history[best.best_epoch]["val/gap_mean"], rel=1e-12)


def test_keep_is_checked():
    with pytest.raises(ValueError, match="keep must be"):
        TrainerConfig(keep="newest")
