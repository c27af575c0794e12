"""Issue 60 item 1: the proposed methods train with their own trainer (conf/trainer/tuned.yaml) on any problem
without a tuning of its own, while the paper's tables, the problem-method tunings and a trainer named on the
command line keep what they had (the paper's trainer underneath)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from hardlinear.harness.rundirs import register_resolvers

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))


@pytest.fixture(autouse=True, scope="module")
def _hydra():
    """One Hydra initialisation for the module's compositions (each test composes several configs)."""
    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        yield


def _cfg(overrides: list[str]) -> dict:
    cfg = compose(config_name="config", overrides=overrides)
    out = OmegaConf.to_container(cfg, resolve=False)
    out.pop("hydra", None)
    return out


@pytest.mark.parametrize("method", ["proposed", "proposed_refined"])
def test_the_method_brings_its_trainer_on_ones_own_problem(method):
    cfg = _cfg(["problem=linear", "problem.path=x.npz", f"method={method}"])
    trainer = cfg["trainer"]
    assert trainer["name"] == "tuned" and cfg["dtype"] == "float64"
    assert cfg["network"] == {"hidden": 200, "layers": 2, "batch_norm": False}
    assert (trainer["batch_size"], trainer["lr"], trainer["weight_decay"]) == (256, 1e-3, 0.0)
    assert trainer["early_stop_patience"] == 20 and trainer["time_cap_min"] == 10


def test_the_command_line_wins_over_the_methods_trainer():
    cfg = _cfg(["problem=linear", "problem.path=x.npz", "trainer.lr=3e-4", "network.hidden=64", "dtype=float32"])
    assert (cfg["trainer"]["name"], cfg["trainer"]["lr"], cfg["network"]["hidden"], cfg["dtype"]) == ("tuned", 3e-4, 64, "float32")
    paper = _cfg(["problem=linear", "problem.path=x.npz", "trainer=default"])
    assert paper["trainer"]["name"] == "default" and paper["trainer"]["lr"] == 1e-4 and paper["dtype"] == "float32"
    assert paper["network"]["batch_norm"] is True and "early_stop_patience" not in paper["trainer"]


def test_other_methods_keep_the_papers_trainer():
    for method in ("e2elr", "dc3", "ldr", "optimizer"):
        cfg = _cfg(["problem=dcopf_14", f"method={method}"])
        assert cfg["trainer"]["name"] == "default" and cfg["dtype"] == "float32", method


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_the_papers_experiments_keep_their_trainer(experiment):
    """Every experiment file composes the proposed method exactly as trainer=default (or its own named trainer)
    would: the committed tables' runs keep their identities."""
    ours = _cfg([f"+experiment={experiment}", "method=proposed_refined"])  # its defaults include proposed's
    named = ours["trainer"]["name"]
    assert named != "tuned"
    assert ours == _cfg([f"+experiment={experiment}", "method=proposed_refined", f"trainer={named}"])


@pytest.mark.parametrize("problem", ["dc3_qp", "dc3_nonconvex"])
def test_dc3s_refined_tuning_is_what_was_measured(problem):
    """conf/problem_method/dc3_*_proposed_refined.yaml as measured (results/peers2026): no early stopping, no cap."""
    cfg = _cfg([f"problem={problem}", "method=proposed_refined"])
    trainer = cfg["trainer"]
    assert (trainer["epochs"], trainer["pretrain_epochs"], trainer["batch_size"], trainer["sampling"]) == (200, 0, 256, "pass")
    assert trainer["early_stop_patience"] is None and trainer["time_cap_min"] is None and cfg["dtype"] == "float64"


def test_eds_tuning_keeps_float32_and_the_paper_schedule():
    cfg = _cfg(["problem=ed", "method=proposed"])
    assert cfg["dtype"] == "float32" and cfg["network"]["hidden"] == 100 and cfg["trainer"]["batch_size"] == 32
    assert cfg["trainer"]["early_stop_patience"] is None and cfg["trainer"]["time_cap_min"] is None
