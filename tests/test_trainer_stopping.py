"""The trainer's options for long runs (issue 58): the learning rate cut on a validation plateau, early stopping on
the validation loss with the best epoch's weights kept, a wall-clock cap in whole epochs; a resumed run keeps their
state; the config checks them and they enter the run's identity only when set."""

import math
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from test_fixed_training_set import problem_with_train

from hardlinear.harness.results import identity
from hardlinear.harness.schemas import ConfigError, validate_config
from hardlinear.methods.base import Context
from hardlinear.methods.penalty import Penalty
from hardlinear.problems.datasets import build_dataset
from hardlinear.train.trainer import TrainerConfig, train

CONF = Path(__file__).resolve().parents[1] / "conf"


def _setup(tmp_path):
    torch.manual_seed(0)
    p, _ = problem_with_train(40)
    ctx = Context(seed=0, progress=False, network={"hidden": 16, "layers": 1, "batch_norm": False})
    method = Penalty(penalty=10.0)
    method.setup(p, ctx)
    val = build_dataset(p, "val", 4, seed=0, cache_dir=tmp_path, progress=False)
    return method, p, val, ctx


def _fit(tmp_path, resume_state=None, on_state=None, **options):
    method, p, val, ctx = _setup(tmp_path)
    cfg = TrainerConfig(pretrain_epochs=0, batch_size=8, batches_per_epoch=2, progress=False, **options)
    return train(method, p, val, cfg, ctx, resume_state=resume_state, on_state=on_state), method, val, p, ctx


def _expected_rates(history, lr: float, factor: float, patience: int) -> list[float]:
    """ReduceLROnPlateau's rule replayed on the recorded validation losses (mode min, threshold 1e-4 relative)."""
    rates, best, bad = [lr], math.inf, 0
    for record in history[:-1]:
        loss = record["val/loss"]
        if loss < best * (1 - 1e-4):
            best, bad = loss, 0
        else:
            bad += 1
        if bad > patience:
            lr, bad = lr * factor, 0
        rates.append(lr)
    return rates


def test_the_rate_falls_on_a_validation_plateau(tmp_path):
    fit, *_ = _fit(tmp_path, epochs=12, lr=0.5, plateau_factor=0.5, plateau_patience=1)
    rates = [h["train/lr"] for h in fit.history]
    assert rates == pytest.approx(_expected_rates(fit.history, 0.5, 0.5, 1))
    assert min(rates) < 0.5  # this run has plateaus: the rule was exercised, not only the constant rate
    constant, *_ = _fit(tmp_path, epochs=12, lr=0.5)
    assert {h["train/lr"] for h in constant.history} == {0.5}


def test_early_stopping_keeps_the_best_epoch(tmp_path):
    fit, method, val, p, ctx = _fit(tmp_path, epochs=60, lr=0.5, early_stop_patience=2)
    assert fit.early_stopped and not fit.time_capped
    assert len(fit.history) == fit.best_epoch + 1 + 2 < 60  # stopped two epochs after the best one
    assert fit.epochs == len(fit.history)
    losses = [h["val/loss"] for h in fit.history]
    assert fit.best_val_loss == min(losses) == losses[fit.best_epoch]
    with torch.no_grad():  # the kept weights are the best epoch's
        assert method.loss(val.xi.to(ctx.dtype), method(val.xi.to(ctx.dtype))).item() == pytest.approx(fit.best_val_loss, rel=1e-6)


def test_the_time_cap_stops_after_a_whole_epoch(tmp_path):
    fit, *_ = _fit(tmp_path, epochs=5, time_cap_min=1e-9)  # passed by the first epoch, whatever the machine
    assert fit.time_capped and not fit.budget_spent and not fit.early_stopped
    assert fit.epochs == 1.0 and len(fit.history) == 1 and fit.history[0]["train/batches"] == 2
    uncapped, *_ = _fit(tmp_path, epochs=3, time_cap_min=1e6)
    assert not uncapped.time_capped and uncapped.epochs == 3.0


def test_a_resumed_run_keeps_the_plateau_and_early_stopping_state(tmp_path):
    options = {"lr": 0.5, "plateau_factor": 0.5, "plateau_patience": 1, "early_stop_patience": 6}
    whole, *_ = _fit(tmp_path, epochs=14, **options)
    states = []
    _fit(tmp_path, epochs=14, on_state=states.append, **options)
    cut = next(s for s in states if 4 <= s["epoch"] <= 9 and s["plateau"]["num_bad_epochs"] > 0)  # mid-plateau
    resumed, *_ = _fit(tmp_path, epochs=14, resume_state=cut, **options)
    key = ("train/lr", "val/loss")
    assert [tuple(h[k] for k in key) for h in resumed.history] == [tuple(h[k] for k in key) for h in whole.history]
    assert (resumed.best_epoch, resumed.early_stopped) == (whole.best_epoch, whole.early_stopped)
    # a resumed run's own factor applies to the counters it carries on (trainer settings may change on resume)
    gentler, *_ = _fit(tmp_path, epochs=14, resume_state=cut, **{**options, "plateau_factor": 0.9})
    after = [h["train/lr"] for h in gentler.history[cut["epoch"]:]]  # from the cut epoch's rate on
    steps = [b / a for a, b in zip(after, after[1:]) if b != a]
    assert steps and steps == pytest.approx([0.9] * len(steps))


@pytest.mark.parametrize("options, message", [
    ({"plateau_factor": 1.5}, "plateau_factor must be in (0, 1)"),
    ({"plateau_factor": 0.1, "schedule": "cosine"}, "use one or the other"),
    ({"early_stop_patience": 0}, "early_stop_patience must be >= 1"),
    ({"time_cap_min": 0}, "time_cap_min must be > 0"),
])
def test_bad_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TrainerConfig(**options)


def test_the_config_checks_the_options_and_they_enter_the_identity_only_when_set():
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        plain = compose(config_name="config", overrides=["trainer=default"])  # the paper's trainer, which lacks them
        assert "plateau_factor" not in plain.trainer  # not in conf/trainer: existing runs keep their identity
        for bad, said in ((["+trainer.plateau_factor=2"], "trainer.plateau_factor must be in (0, 1); got 2"),
                          (["+trainer.early_stop_patience=0"], "trainer.early_stop_patience must be >= 1"),
                          (["+trainer.time_cap_min=-1"], "trainer.time_cap_min must be > 0"),
                          (["+trainer.plateau_factor=0.1", "+trainer.schedule=cosine"], "trainer.schedule='cosine'")):
            with pytest.raises(ConfigError, match=said.replace("(", r"\(").replace(")", r"\)")):
                validate_config(compose(config_name="config", overrides=["trainer=default", *bad]))
        good = compose(config_name="config", overrides=["trainer=default", "+trainer.plateau_factor=0.1", "+trainer.early_stop_patience=20",
                                                       "+trainer.time_cap_min=150", "+network.dropout=0.2"])
        validate_config(good)
    from omegaconf import OmegaConf

    base = OmegaConf.to_container(plain, resolve=True)
    with_options = OmegaConf.to_container(good, resolve=True)
    assert identity(base) != identity(with_options)
