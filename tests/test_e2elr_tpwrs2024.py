"""``+experiment=e2elr_tpwrs2024`` (issue 58, item 1): the E2ELR paper's protocol as one config, composed and resolved
as a run sees it, for each method; a tiny run of it end to end; the published rows it is compared with."""

from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from hardlinear.harness.overrides import unknown_override_errors
from hardlinear.harness.rundirs import register_resolvers
from hardlinear.harness.schemas import validate_config
from hardlinear.problems.ed import default_name
from hardlinear.reporting.e2elr_published import published_gaps

CONF = Path(__file__).resolve().parents[1] / "conf"


def resolved(*overrides: str) -> dict:
    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["+experiment=e2elr_tpwrs2024", *overrides])
    validate_config(cfg)
    return OmegaConf.to_container(cfg, resolve=True)


@pytest.fixture(scope="module")
def e2elr_300():
    return resolved("problem.case=pglib_opf_case300_ieee", "method=e2elr")


def test_the_papers_problem_data_network_and_training(e2elr_300):
    cfg = e2elr_300
    assert cfg["experiment"] == "e2elr_tpwrs2024"
    p = cfg["problem"]
    assert (p["name"], p["case"], p["sampler"], p["load_low"], p["load_high"], p["load_noise"]) == (
        "ed", "pglib_opf_case300_ieee", "e2elr", 0.8, 1.2, 0.05)
    assert p["zero_pmin"] is True and p["thermal_penalty"] == 150000.0  # 1,500 $/MW at baseMVA 100
    assert cfg["network"] == {"hidden": 256, "layers": 3, "batch_norm": True, "dropout": 0.2}
    assert (cfg["data"]["val_size"], cfg["data"]["test_size"]) == (5000, 5000)
    t = cfg["trainer"]
    assert (t["optimizer"], t["lr"], t["weight_decay"], t["batch_size"], t["pretrain_epochs"]) == ("adam", 1e-2, 1e-6, 64, 0)
    assert (t["train_size"], t["sampling"], t["train_inputs"]) == (40000, "pass", "auto")
    assert (t["plateau_factor"], t["plateau_patience"], t["early_stop_patience"], t["time_cap_min"]) == (0.1, 10, 20, 150)
    assert t.get("schedule", "constant") == "constant" and t.get("keep", "best") == "best"  # the model chosen on validation
    assert cfg["method"]["bound_repair"] == "sigmoid"  # with pmin = 0: sigmoid times pmax


def test_the_network_follows_the_case():
    assert resolved("problem.case=pglib_opf_case1354_pegase", "method=e2elr")["network"]["layers"] == 4
    for case in ("pglib_opf_case6470_rte", "pglib_opf_case9241_pegase", "pglib_opf_case14_ieee"):
        assert resolved(f"problem.case={case}", "method=e2elr")["network"]["layers"] == 3
    assert resolved("problem.case=pglib_opf_case1354_pegase", "network.layers=2")["network"]["layers"] == 2  # still overridable


def test_every_method_gets_the_same_budget_and_dc3_the_papers_steps(e2elr_300):
    dc3 = resolved("problem.case=pglib_opf_case300_ieee", "method=dc3")
    assert (dc3["method"]["train_steps"], dc3["method"]["max_iter"], dc3["method"]["lr"]) == (50, 200, 1e-4)
    assert dc3["method"]["thermal"] == "soft"  # the paper's model: no thermal slack variables
    proposed = resolved("problem.case=pglib_opf_case300_ieee", "method=proposed")
    assert proposed["method"]["refine"] == "problem"  # its dispatch settings (conf/problem_method/ed_proposed.yaml) stay
    assert proposed["method"]["refine_geometry"] == "proportional"  # but the map measured best on this protocol
    for other in (dc3, proposed):
        assert other["network"] == e2elr_300["network"] and other["trainer"] == e2elr_300["trainer"]
        assert other["data"] == e2elr_300["data"] and other["problem"] == e2elr_300["problem"]


def test_the_two_ldf_schedules():
    tests = resolved("method=ldf_ml4opf_tests")["method"]
    defaults = resolved("method=ldf_ml4opf_defaults")["method"]
    assert (tests["step_size"], tests["update_every"], defaults["step_size"], defaults["update_every"]) == (1e-2, 1, 1e-5, 500)
    assert (tests["name"], defaults["name"]) == ("ldf_ml4opf_tests", "ldf_ml4opf_defaults") and tests["fit"] == defaults["fit"] == "supervised"


def test_the_case_override_is_not_called_unknown():
    """The experiment chooses problem=ed_tpwrs2024, which has problem.case: the pre-check composes with it."""
    argv = ["+experiment=e2elr_tpwrs2024", "problem.case=pglib_opf_case30_ieee", "method=e2elr"]
    assert unknown_override_errors(argv, CONF) == []
    assert unknown_override_errors(["problem.case=pglib_opf_case30_ieee"], CONF)  # without it, dcopf_14 has none


def test_a_tiny_run_of_the_protocol(tmp_path):
    """case14, 3 epochs of a 256-input fixed set: every option reaches the run and its record."""
    from hardlinear.harness import results
    from hardlinear.harness.checkpoint import load_run
    from hardlinear.harness.runner import run

    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            "+experiment=e2elr_tpwrs2024", "problem.case=pglib_opf_case14_ieee", "method=e2elr", "network.hidden=32",
            "data.val_size=16", "data.test_size=32", "trainer.train_size=256", "trainer.epochs=3", "eval.warmup=1",
            "eval.throughput_batch=64", "progress=false", f"cache_dir={tmp_path / 'cache'}", f"results_dir={tmp_path}"])
    row = run(cfg, tmp_path / "run")
    record = results.read_record(tmp_path / "run" / results.RECORD_FILE)
    assert record["status"] == "ok" and record["study"] == "e2elr_tpwrs2024"
    assert record["config"]["trainer"]["early_stop_patience"] == 20 and record["config"]["network"]["dropout"] == 0.2
    assert row["train/epochs"] == 3.0 and row["train/early_stopped"] == 0.0 and row["train/time_capped"] == 0.0
    assert row["test/ineq_viol_worst"] == 0.0 and row["test/gap_sgm"] <= row["test/gap_mean"]
    epochs = (tmp_path / "run" / "epochs.csv").read_text().splitlines()
    assert len(epochs) == 1 + 3 and "train/batches" in epochs[0]
    method = load_run(tmp_path / "run")
    assert sum(isinstance(m, torch.nn.Dropout) for m in method.modules()) == 3  # after each of the 3 hidden layers
    assert method.problem.zero_pmin and method.problem.sampler == "e2elr"


def test_the_published_rows():
    rows = published_gaps()
    assert len(rows) == 12 and {r.verified for r in rows} == {"no"}  # quoted from issue 58, said so in source
    got = {(r.case, r.method, r.training): float(r.gap_pct) for r in rows}
    assert got[("pglib_opf_case300_ieee", "E2ELR", "self-supervised")] == 0.74
    assert got[("pglib_opf_case1354_pegase", "E2ELR", "self-supervised")] == 0.63
    assert got[("pglib_opf_case9241_pegase", "DC3", "self-supervised")] == 0.82
    assert all(r.problem == default_name(r.case) and "1 % shift" in r.statistic and "2304.11726v2" in r.source for r in rows)


def test_the_protocol_table_sets_our_figure_beside_the_published_one():
    """scripts/maintainers/ed_tpwrs2024_table.py: the seeds' SGM, its ratio to the published figure and whether it
    lies within 20 %; a published row we did not run is listed as such; a failed run is named."""
    import sys

    import pandas as pd

    sys.path.insert(0, str(CONF.parent / "scripts" / "maintainers"))
    import ed_tpwrs2024_table as t

    stats = {f"test/gap_{s}": 1.0 for s in ("mean", "median", "p95", "p99", "worst")}
    rows = [{"status": "ok", "cfg.problem.case": "pglib_opf_case300_ieee", "method": "e2elr", "seed": s, "test/gap_sgm": v,
             "test/eq_viol_worst": 0.0, "test/ineq_viol_worst": 0.0, "train/epochs": 100, "train/time_s": 600.0,
             "train/time_capped": 0.0, "test/time_ms": 1.0, **stats} for s, v in ((0, 0.80), (1, 0.84))]
    rows.append({"status": "diverged", "cfg.problem.case": "pglib_opf_case300_ieee", "method": "dc3", "seed": 0, "problem": "ed_case300_ieee"})
    published = pd.DataFrame([vars(g) for g in published_gaps()]).astype({"gap_pct": float})
    text = t.table(pd.DataFrame(rows), published)
    line = next(x for x in text.splitlines() if x.startswith("| case300_ieee | E2ELR"))
    cells = [c.strip() for c in line.split("|")[1:-1]]
    assert cells[2:7] == ["2", "0.820 (0.800-0.840)", "0.74", f"{0.82 / 0.74:.2f}", "yes"]
    assert "- case1354_pegase E2ELR (self-supervised): 0.63 %" in text  # published, not run
    assert "- ed_case300_ieee dc3 seed 0: diverged" in text
    far = t.table(pd.DataFrame([{**rows[0], "test/gap_sgm": 2.0}]), published)
    assert "| no |" in far
