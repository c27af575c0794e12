"""Saved models: every run saves its checkpoint; ``load_run`` gives back a method whose ``predict`` reproduces
the run's outputs bit for bit; ``evaluate.py`` re-evaluates it on new data; the exported program (``torch.export``) is feasible
and equal to the model it came from."""

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir

import hardlinear
from hardlinear.evaluation.metrics import instance_metrics
from hardlinear.harness import runner as harness
from hardlinear.harness.checkpoint import CheckpointError, check_inputs, checkpoint_path, read_checkpoint
from hardlinear.harness.reevaluate import evaluate_run
from hardlinear.problems.datasets import build_dataset

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
METHODS = ("proposed", "dc3", "ldr")  # trained with a rule, trained baseline, nothing trained


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One finished dcopf_14 run per method (trainer=fast, small sets): method -> (run_dir, cfg)."""
    work = tmp_path_factory.mktemp("checkpoint")
    out = {}
    for method in METHODS:
        overrides = [
            "problem=dcopf_14", f"method={method}", "trainer=fast", "progress=false", "data.val_size=20",
            "data.test_size=20", "eval.throughput_batch=64", "eval.warmup=0", "eval.time_instances=2",
            f"cache_dir={work / 'cache'}", f"results_dir={work / 'results'}",
        ]
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = compose(config_name="config", overrides=overrides)
        run_dir = work / method
        assert harness.run(cfg, run_dir) is not None
        out[method] = (run_dir, cfg)
    return out


@pytest.mark.parametrize("method", METHODS)
def test_run_saves_a_complete_checkpoint_atomically(runs, method):
    run_dir, _ = runs[method]
    payload = read_checkpoint(run_dir)
    assert payload["method"] == method and payload["config"]["method"]["name"] == method
    assert payload["config"]["trainer"]["name"] == "fast"
    assert not [p.name for p in run_dir.iterdir() if p.name.endswith(".tmp")], "a temporary file was left behind"
    if method != "ldr":  # a network: its input standardisation is spelled out
        std = payload["standardisation"]
        assert std["mean"].shape == std["inv_std"].shape == (14,)
    if method in ("proposed", "ldr"):  # the rule it used, coefficients and margin
        assert any(k.endswith("rule.linear") for k in payload["state_dict"])
        assert math.isfinite(payload["rule"]["t_star"]) and payload["rule"]["t_star"] > 0


@pytest.mark.parametrize("method", METHODS)
def test_load_run_predicts_exactly_what_the_run_did(runs, method):
    run_dir, cfg = runs[method]
    loaded = hardlinear.load_run(run_dir)
    assert not loaded.training and loaded.name == method
    probe = read_checkpoint(run_dir)["probe"]
    assert torch.equal(loaded.predict(probe["xi"]).y.double(), probe["y"])  # bit-identical, float64
    # and the whole test set: re-evaluating on the run's own test data gives the run's own metrics
    recorded = json.loads((run_dir / "metrics.json").read_text())
    record = evaluate_run(run_dir, out_dir=run_dir / "eval-same")
    for key in ("test/gap_mean", "test/gap_worst", "test/eq_viol_worst", "test/ineq_viol_worst"):
        assert record[key] == recorded[key], key
    assert record["problem"] == "dcopf_14" and record["method"] == method
    on_disk = json.loads((run_dir / "eval-same" / "metrics.json").read_text())
    assert on_disk["test/gap_mean"] == recorded["test/gap_mean"]


def _load_evaluate_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("evaluate_cli", ROOT / "evaluate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reevaluation_on_new_test_seed_and_user_inputs(runs, tmp_path, monkeypatch, capsys):
    run_dir, cfg = runs["proposed"]
    new = evaluate_run(run_dir, test_seed=7, test_size=12, out_dir=tmp_path / "seed7")
    assert new["data.test_seed"] == 7 and new["data.test_size"] == 12
    assert new["test/gap_mean"] != json.loads((run_dir / "metrics.json").read_text())["test/gap_mean"]
    xi = build_dataset(hardlinear.load_run(run_dir).problem, "test", 5, 99, None, cfg.cache_dir, False).xi.numpy()
    np.savetxt(tmp_path / "mine.csv", xi, delimiter=",")
    cli = _load_evaluate_script()  # the CLI's main, in this process (no interpreter start-up)
    monkeypatch.setattr(sys, "argv", ["evaluate.py", str(run_dir), "--inputs", str(tmp_path / "mine.csv"), "--out", str(tmp_path / "mine")])
    assert cli.main() == 0
    assert "evaluated dcopf_14/proposed on 5 instances" in capsys.readouterr().out
    record = json.loads((tmp_path / "mine" / "metrics.json").read_text())
    assert record["data.test_size"] == 5 and record["test/ineq_viol_worst"] <= 1e-12
    with np.load(tmp_path / "mine" / "predictions.npz") as saved:
        assert saved["y"].shape == (5, 123) and np.array_equal(saved["xi"], xi)


def test_reevaluation_is_a_record_of_its_own_study_never_a_duplicate(runs, tmp_path):
    from hardlinear.harness import results

    run_dir, _ = runs["proposed"]
    original = results.read_record(run_dir / "record.json")
    new = evaluate_run(run_dir, test_seed=7, test_size=12, out_dir=tmp_path / "run" / "eval" / "seed7")
    body = results.read_record(tmp_path / "run" / "eval" / "seed7" / "record.json")  # verified: schema, checksum
    assert body["study"] == f"{original['study']}-eval" == new["study"] and body["status"] == "ok"
    assert body["identity"] != original["identity"] and body["config"]["data"]["test_seed"] == 7
    assert body["config"]["evaluated"]["identity"] == original["identity"]
    assert body["row"]["test/gap_mean"] == new["test/gap_mean"]
    table = results.load_records([run_dir, tmp_path / "run"], quiet=True)
    ours = table[table["study"] == original["study"]]
    assert list(ours["identity"]) == [original["identity"]]  # the run, once: the re-evaluation is not a rerun
    assert (table["identity"] == body["identity"]).sum() == 1
    assert results.find_recorded(str(tmp_path), original["identity"], study=original["study"]) is None


def test_export_is_feasible_and_equal_to_the_model(runs, tmp_path):
    run_dir, _ = runs["proposed"]
    path = hardlinear.export(run_dir, tmp_path / "proposed.pt2")
    exported = torch.export.load(str(path)).module()
    method = hardlinear.load_run(run_dir)
    method.fused_inference = False  # the export records the unfused path; predict runs fused by default
    xi = check_inputs(method.problem, 200, seed=11)  # fresh inputs, plus the box's two corners
    with torch.no_grad():
        y = exported(xi)
        reference = method.predict(xi)
    assert y.dtype == torch.float64
    assert float((reference.extras["alpha"] > 0).double().mean()) > 0.1, "the check must include blended rows"
    assert torch.equal(y, reference.y)
    m = instance_metrics(method.problem, xi, y, np.ones(len(xi)))
    # the layer's float64 guarantees (layers/feasibility.py): inequalities hold, equalities to rounding
    assert m["ineq_viol"].max() == 0.0 and m["eq_viol"].max() <= 1e-12
    assert torch.equal(exported(xi[:1]), y[:1]) or (exported(xi[:1]) - y[:1]).abs().max() <= 1e-12


def test_a_probe_is_replayed_by_the_inference_path_it_was_recorded_with(runs, tmp_path):
    """Fused and unfused outputs differ by the float32 network's rounding, so the probe records its path; a
    checkpoint without that record (older ones) is replayed by either path, and the model keeps the one that
    reproduces it."""
    from hardlinear.harness.checkpoint import PROBE_RTOL, relative_difference

    run_dir, _ = runs["proposed"]
    payload = torch.load(checkpoint_path(run_dir), weights_only=True)
    assert payload["probe"]["fused"] is True  # the default path, and it applies at 14 buses
    method = hardlinear.load_run(run_dir)
    method.fused_inference = False
    unfused = method.predict(payload["probe"]["xi"]).y.double()
    method.fused_inference = True
    assert relative_difference(method.predict(payload["probe"]["xi"]).y.double(), unfused) > PROBE_RTOL  # the premise
    for record, name in ((False, "recorded"), (None, "unrecorded")):
        altered = dict(payload, probe={"xi": payload["probe"]["xi"], "y": unfused, **({} if record is None else {"fused": record})})
        (tmp_path / name).mkdir()
        torch.save(altered, checkpoint_path(tmp_path / name))
        loaded = hardlinear.load_run(tmp_path / name)
        assert loaded.fused_inference is False and torch.equal(loaded.predict(payload["probe"]["xi"]).y.double(), unfused)


def test_load_run_refuses_a_missing_or_altered_checkpoint(runs, tmp_path):
    with pytest.raises(CheckpointError, match="no saved model at .*rerun that configuration"):
        hardlinear.load_run(tmp_path)
    run_dir, _ = runs["dc3"]
    payload = torch.load(checkpoint_path(run_dir), weights_only=True)
    y = payload["probe"]["y"]
    payload["probe"]["y"] = y + 1e-3 * y.abs().max()  # as if the code now computed something else
    (tmp_path / "altered").mkdir()
    torch.save(payload, checkpoint_path(tmp_path / "altered"))
    # the message says where, by how much, against which tolerance derived how, and the thread pools
    with pytest.raises(CheckpointError, match=r"does not reproduce its saved outputs: worst at probe input \d+, output \d+.*"
                       r"relative difference 0\.00\d+ > tolerance .*gamma.*Thread pools now"):
        hardlinear.load_run(tmp_path / "altered")
    payload["probe"]["y"] = y + 1e-9 * y.abs().max()  # rounding-sized (another BLAS thread count): accepted
    (tmp_path / "rounding").mkdir()
    torch.save(payload, checkpoint_path(tmp_path / "rounding"))
    assert hardlinear.load_run(tmp_path / "rounding").name == "dc3"
    assert hardlinear.load_run(tmp_path / "altered", verify=False).name == "dc3"
    (tmp_path / "garbage").mkdir()
    checkpoint_path(tmp_path / "garbage").write_bytes(b"\x00not a checkpoint")
    with pytest.raises(CheckpointError, match="cannot be read"):
        hardlinear.load_run(tmp_path / "garbage")
