"""The trainer on a fixed training set: the problem's own inputs (DC3's split), one shuffled pass per epoch."""

import numpy as np
import pytest
import torch
from test_linear_problem import small_arrays

from hardlinear.methods.base import Context
from hardlinear.problems.linear import LinearProblem
from hardlinear.train.trainer import TrainerConfig, _epoch_indices, training_inputs


def problem_with_train(n: int = 23) -> tuple[LinearProblem, np.ndarray]:
    train = np.random.default_rng(3).uniform(-1, 1, size=(n, 2))
    return LinearProblem(arrays={**small_arrays(), "train_inputs": train}), train


def fit_penalty(tmp_path, hidden: int = 16, **options):
    """A one-layer penalty method trained on ``problem_with_train(40)`` with these trainer options (no pre-training,
    batch 8): the small, deterministic run the trainer's own tests (keep, schedule) inspect."""
    from hardlinear.methods.penalty import Penalty
    from hardlinear.problems.datasets import build_dataset
    from hardlinear.train.trainer import train

    torch.manual_seed(0)
    p, _ = problem_with_train(40)
    ctx = Context(seed=0, progress=False, network={"hidden": hidden, "layers": 1, "batch_norm": False})
    method = Penalty(penalty=10.0)
    method.setup(p, ctx)
    val = build_dataset(p, "val", 4, seed=0, cache_dir=tmp_path, progress=False)
    return train(method, p, val, TrainerConfig(pretrain_epochs=0, batch_size=8, progress=False, **options), ctx)


def test_problem_training_inputs_are_used_unless_box_is_asked():
    p, train = problem_with_train()
    ctx = Context(seed=0)
    fixed = training_inputs(p, TrainerConfig(), ctx)
    assert torch.equal(fixed, torch.as_tensor(train))
    assert training_inputs(p, TrainerConfig(train_inputs="box"), ctx) is None
    sampled = training_inputs(p, TrainerConfig(train_inputs="box", train_size=7), ctx)
    assert sampled.shape == (7, 2) and not torch.equal(sampled, torch.as_tensor(train[:7]))


def test_pass_epoch_visits_every_row_once_in_shuffled_batches():
    cfg = TrainerConfig(batch_size=5, sampling="pass")
    gen = torch.Generator().manual_seed(0)
    first = _epoch_indices(cfg, gen, 23)
    assert [len(b) for b in first] == [5, 5, 5, 5, 3]
    assert sorted(torch.cat(first).tolist()) == list(range(23))
    second = _epoch_indices(cfg, gen, 23)
    assert not torch.equal(torch.cat(first), torch.cat(second))  # reshuffled each epoch
    # a one-row remainder is dropped: batch normalisation needs two rows
    assert [len(b) for b in _epoch_indices(cfg, gen, 21)] == [5, 5, 5, 5]
    assert _epoch_indices(TrainerConfig(), gen, 23) == [None] * TrainerConfig().batches_per_epoch


def test_pass_epoch_without_a_fixed_set_names_the_fix():
    p = LinearProblem(arrays=small_arrays())
    with pytest.raises(ValueError, match="train_size"):
        training_inputs(p, TrainerConfig(sampling="pass"), Context())
    with pytest.raises(ValueError, match="sampling must be one of"):
        TrainerConfig(sampling="sweep")


def test_training_runs_on_the_fixed_set(tmp_path):
    from hardlinear.methods.penalty import Penalty
    from hardlinear.problems.datasets import build_dataset
    from hardlinear.train.trainer import train

    p, _ = problem_with_train(40)
    ctx = Context(seed=0, progress=False, network={"hidden": 16, "layers": 1, "batch_norm": True})
    method = Penalty(penalty=10.0)
    method.setup(p, ctx)
    val = build_dataset(p, "val", 4, seed=0, cache_dir=tmp_path, progress=False)
    fit = train(method, p, val, TrainerConfig(epochs=2, pretrain_epochs=0, batch_size=16, sampling="pass", progress=False), ctx)
    assert len(fit.history) == 2 and np.isfinite(fit.history[-1]["train/loss"])
