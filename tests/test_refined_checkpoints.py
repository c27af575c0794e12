"""The committed weights of issue 28's headline runs (the refined proposed method on DC3's problems, and with the
objective pick on DC-OPF and the portfolio) reload and give back their recorded test figures, with the inequality
violation exactly zero: the claims in docs/peer_methods.md rest on these files, not on a table typed by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "results" / "peers2026" / "records"
RUNS = sorted(p for p in RECORDS.glob("*-dr10-50-lr1e-4-e300p20/0-*") if p.is_dir())
RUNS += sorted(p for p in RECORDS.glob("refined-pick200/*-seed0") if p.is_dir())
# issue 41: method=proposed_refined (the recommended setting), seed 0, on the 50/50 problems, DC-OPF and the portfolio
RECOMMENDED = [RECORDS / "frontier/dc3_qp-eq/2-dc3_qp-proposed-seed0", RECORDS / "frontier/dc3_nonconvex/0-dc3_nonconvex-proposed-seed0"]
RECOMMENDED += sorted(p for p in RECORDS.glob("frontier/dcopf-portfolio/*-seed0") if p.is_dir())
RUNS += RECOMMENDED


# Trained before refine=dr treated rows of H N that are SVD rounding as zero rows (issue 40): their refined outputs
# followed that rounding, which differs between machines (neither the code of bc45e96 nor today's reloads them
# here: 0.11 and 0.035 off). Issue 41's runs of the same configuration (frontier/dcopf-portfolio) replace them.
ROUNDING_ROWS = {"dcopf_57-refined-pick200-seed0", "dcopf_118-refined-pick200-seed0"}
PARAMS = [
    pytest.param(p, marks=pytest.mark.xfail(strict=True, reason="trained with rounding rows scaled up (issue 40)"))
    if p.name in ROUNDING_ROWS else p
    for p in RUNS
]


@pytest.mark.slow  # the reference solves of 833 test instances (SLSQP for the nonconvex problem): minutes
@pytest.mark.parametrize("run_dir", PARAMS, ids=[f"{p.parent.name}/{p.name}" for p in RUNS])
def test_a_committed_refined_run_reloads_to_its_recorded_figures(run_dir, tmp_path):
    from hardlinear.evaluation.metrics import instance_metrics
    from hardlinear.harness.checkpoint import load_run
    from hardlinear.problems.datasets import build_dataset

    record = json.loads((run_dir / "record.json").read_text())["row"]
    method = load_run(run_dir, cache_dir=str(tmp_path))
    problem, config = method.problem, method.run_config
    data = config["data"]  # DC3's problems: their fixed 833 test inputs (size and seed then ignored)
    test = build_dataset(problem, "test", data["test_size"], data["test_seed"], data.get("solver"), str(tmp_path), progress=False)
    with torch.no_grad():
        y = method.predict(test.xi.to(torch.float64)).y
    m = instance_metrics(problem, test.xi, y, test.objective)
    assert len(m["gap"]) == (833 if problem.name.startswith("dc3") else data["test_size"])
    assert np.mean(m["gap"]) == pytest.approx(record["test/gap_mean"], rel=1e-9)
    assert float(np.max(m["ineq_max"])) <= 0.0  # exactly feasible in the float64 evaluation
    assert float(np.max(m["eq_max"])) < 1e-12


def test_the_headline_runs_are_committed():
    assert {p.parent.name.split("-")[0] for p in RUNS if p not in RECOMMENDED} == {"ncvx", "qp", "refined"}
    assert {p.name.split("-")[0] for p in RUNS if p.parent.name == "refined-pick200"} == {
        "dcopf_14", "dcopf_57", "dcopf_118", "portfolio"}
    assert all((p / "checkpoint.pt").is_file() for p in RECOMMENDED)
    assert {p.name.split("-")[1] for p in RECOMMENDED} == {"dc3_qp", "dc3_nonconvex", "dcopf_14", "dcopf_57", "dcopf_118", "portfolio"}
