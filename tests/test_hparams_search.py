"""Issue 60 item 1: ``+hparams_search=lr_width_batch`` (Hydra's Optuna sweeper) runs a search on one's own npz, and
what it minimises is each trial's validation gap as recorded."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from hardlinear.harness.search import search_objective

ROOT = Path(__file__).resolve().parents[1]


def test_the_objective_is_the_rows_metric_and_inf_for_anything_else():
    assert search_objective({"status": "ok", "val/gap_mean": 0.25}, "val/gap_mean") == 0.25
    for row in (None, {}, {"status": "diverged", "val/gap_mean": 0.1}, {"status": "ok"}, {"status": "ok", "val/gap_mean": float("nan")}):
        assert search_objective(row, "val/gap_mean") == math.inf


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("hydra_plugins.hydra_optuna_sweeper") is None,
                    reason="needs hydra-optuna-sweeper (the harness extra)")
def test_a_two_trial_search_runs_and_keeps_the_best_validation_gap(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts" / "examples"))
    try:
        from random_qp import build
    finally:
        sys.path.pop(0)
    npz = tmp_path / "tiny.npz"
    np.savez(npz, **build(n=8, k=2, m_eq=2, m_ineq=12, boxed=4))
    cmd = [sys.executable, str(ROOT / "run.py"), "+hparams_search=lr_width_batch", "problem=linear", f"problem.path={npz}",
           "method=proposed", "trainer.epochs=2", "trainer.pretrain_epochs=1", "trainer.batches_per_epoch=2",
           "hydra.sweeper.n_trials=2", f"results_dir={tmp_path / 'results'}", f"cache_dir={tmp_path / 'cache'}",
           "data.val_size=20", "data.test_size=20", "eval.warmup=0", "eval.throughput_batch=64", "threads=1", "progress=false"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (result,) = (tmp_path / "results" / "multirun").glob("*/optimization_results.yaml")
    best = yaml.safe_load(result.read_text())
    records = [json.loads(p.read_text()) for p in result.parent.glob("*/record.json")]
    assert len(records) == 2 and all(r["status"] == "ok" for r in records)
    gaps = [r["row"]["val/gap_mean"] for r in records]
    assert best["best_value"] == pytest.approx(min(gaps), rel=1e-12)
    assert set(best["best_params"]) == {"trainer.lr", "network.hidden", "trainer.batch_size"}
    chosen = [r for r in records if r["row"]["val/gap_mean"] == min(gaps)][0]["config"]
    assert chosen["network"]["hidden"] == best["best_params"]["network.hidden"]


def test_a_search_section_is_checked_and_leaves_the_identity_alone():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from hardlinear.harness.results import identity
    from hardlinear.harness.rundirs import register_resolvers
    from hardlinear.harness.schemas import ConfigError, validate_config

    register_resolvers()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        plain = compose(config_name="config")
        searched = compose(config_name="config", overrides=["+search.metric=val/gap_mean"])
        validate_config(searched)
        with pytest.raises(ConfigError, match="search must be a mapping with the one key 'metric'"):
            validate_config(compose(config_name="config", overrides=["+search.metrik=val/gap_mean"]))
    assert identity(OmegaConf.to_container(plain, resolve=True)) == identity(OmegaConf.to_container(searched, resolve=True))
