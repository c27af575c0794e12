"""``trainer.schedule``: ``cosine`` lowers the learning rate along a half cosine over the objective phase, leaves
pre-training at ``lr``, and is what the optimizer actually used (``train/lr`` in each epoch's record)."""

import math

import pytest
from test_fixed_training_set import fit_penalty

from hardlinear.train.trainer import TrainerConfig, scheduled_lr


def test_cosine_values_and_constant_default():
    cfg = TrainerConfig(epochs=12, pretrain_epochs=2, lr=0.1, schedule="cosine")
    lrs = [scheduled_lr(cfg, e, 2) for e in range(12)]
    assert lrs[:3] == [0.1, 0.1, 0.1]  # pre-training, then the first objective epoch at the full rate
    assert lrs[2 + 5] == pytest.approx(0.05)  # half-way through the 10 objective epochs
    assert all(a > b for a, b in zip(lrs[2:], lrs[3:]))
    assert lrs[-1] == pytest.approx(0.05 * (1 + math.cos(math.pi * 9 / 10))) and lrs[-1] > 0
    plain = TrainerConfig(epochs=12, pretrain_epochs=2, lr=0.1)
    assert {scheduled_lr(plain, e, 2) for e in range(12)} == {0.1}


def test_schedule_is_checked():
    with pytest.raises(ValueError, match="schedule must be one of"):
        TrainerConfig(schedule="step")


def test_training_records_the_rate_it_used(tmp_path):
    options = dict(epochs=4, batches_per_epoch=2, lr=0.2, val_every=4, schedule="cosine")
    result = fit_penalty(tmp_path, hidden=8, **options)
    cfg = TrainerConfig(pretrain_epochs=0, **options)
    assert [h["train/lr"] for h in result.history] == pytest.approx([scheduled_lr(cfg, e, 0) for e in range(4)])
