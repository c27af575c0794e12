"""Contract: every method config runs end to end through the harness on dcopf_14 and the portfolio with
``trainer=fast``, and writes one results row with the full schema (the iterative methods with their counts)."""

import math
import re
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from hardlinear.harness import results
from hardlinear.harness import runner as harness
from hardlinear.solvers import SolverUnavailable, solver_class

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
METHODS = sorted(p.stem for p in (CONF / "method").glob("*.yaml"))
ITERATIVE = {"apm", "eapm", "dc3", "optimizer", "optimizer_gurobi", "optimizer_osqp", "post_projection",
             "post_projection_gurobi", "post_projection_osqp", "pinet", "fsnet"}
CORRECTIONS = {"apm", "eapm", "dc3"}  # iterate from the network's output until within tol
HARD = {"proposed", "proposed_nopretrain", "proposed_refined", "ldr", "gauge"}  # feasible by construction: worst violations ~0
ED_METHODS = ["e2elr", "ldf", "proposed", "proposed+slack_repair"]  # issue 42; proposed takes conf/problem_method/ed_proposed.yaml
SOLVER_TOL = {"projection_layer"}  # feasible up to its QP solver's tolerance (Clarabel through cvxpylayers)
# (method, problem) pairs whose set-up raises NotApplicable (methods/base.py), with a phrase of their reason
NOT_APPLICABLE = {
    ("hardnet_aff", "dcopf_14"): r"84 inequality \+ 122 equality rows for n = 123",
    ("hardnet_aff", "portfolio"): r"9 inequality \+ 11 equality rows for n = 16",
    ("gauge", "portfolio"): r"G\(x\) \(11 x 16\) depends on the input",
    ("pinet", "portfolio"): r"here G depends on the input \(11 equality, 9 inequality rows, n = 16\)",
    ("e2elr", "dcopf_14"): r"dcopf_14 is not one: run it with problem=ed",
    ("e2elr", "portfolio"): r"portfolio is not one: run it with problem=ed",
    # ML4OPF's two LDF schedules (issue 58) derive the thermal slack from the dispatch: economic dispatch only
    **{(ldf, problem): r"needs an economic dispatch \(problem=ed\)" for ldf in ("ldf_ml4opf_defaults", "ldf_ml4opf_tests")
       for problem in ("dcopf_14", "portfolio")},
}
EXTRA = {"projection_layer": ["trainer.batch_size=4", "trainer.batches_per_epoch=2", "trainer.epochs=2", "trainer.pretrain_epochs=0"]}  # one conic solve per instance: keep the smoke test short


def gurobi_usable() -> bool:
    try:
        solver_class("gurobi")
        import gurobipy

        gurobipy.Model().dispose()
        return True
    except (SolverUnavailable, ImportError, Exception):  # noqa: BLE001 - any licence or import failure
        return False


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """Caches (datasets, decision rules) shared by the module's runs; one results CSV."""
    return tmp_path_factory.mktemp("contract")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("problem", ["dcopf_14", "portfolio"])
def test_every_method_config_writes_a_full_row(workdir, method, problem):
    if "gurobi" in method and not gurobi_usable():
        pytest.skip("gurobipy or its licence is not available here")
    overrides = [
        f"problem={problem}", f"method={method}", "trainer=fast", "progress=false",
        "data.val_size=16", "data.test_size=16", "eval.throughput_batch=64", "eval.warmup=1",
        f"cache_dir={workdir / 'cache'}", f"results_dir={workdir}", *EXTRA.get(method, []),
    ]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    run_dir = workdir / f"{problem}-{method}"
    if (method, problem) in NOT_APPLICABLE:
        # refused in set-up, before anything is trained: a not_applicable record with the reason, no numbers
        assert harness.run(cfg, run_dir) is None
        table = results.load_records(workdir)
        mine = table[(table["method"] == cfg.method.name) & (table["problem"] == problem)]
        assert mine["status"].tolist() == ["not_applicable"]
        assert re.search(NOT_APPLICABLE[method, problem], mine["reason"].iloc[0])
        assert mine["test/gap_mean"].isna().all()
        return
    row = harness.run(cfg, run_dir)
    assert row is not None, f"{problem}/{method} was skipped: see {run_dir / 'record.json'}"

    # the record on disk has every schema column, and it is this run's
    table = results.load_records(workdir)
    assert set(results.COLUMNS) <= set(table.columns)
    mine = table[table["config_hash"] == row["config_hash"]]
    assert len(mine) == 1 and mine.iloc[0]["status"] == "ok"
    got = mine.iloc[0]
    for key in ("test/gap_mean", "test/eq_viol_worst", "test/ineq_viol_worst", "test/time_ms", "test/iterations"):
        assert math.isfinite(got[key]), f"{key} is not finite for {problem}/{method}"
    assert got["test/time_ms"] > 0 and got["test/throughput"] > 0
    assert got["n"] > 0 and got["k"] > 0
    assert (run_dir / "metrics.json").is_file()

    if method in CORRECTIONS:
        # counted after the first projection: 0 when the network's projected output is already within tol
        # (APM/EAPM trained through their correction get there), never above the method's limit
        assert 0 <= got["test/iterations"] <= 300, f"{method} must report its iterations"
        assert got["test/ineq_viol_worst"] <= 1e-3 or got["test/iterations"] > 0
    elif method in ITERATIVE:
        assert got["test/iterations"] >= 1, f"{method} must report its iterations"
    else:
        assert got["test/iterations"] == 1
    if method in HARD:
        assert got["test/ineq_viol_worst"] <= 1e-8 and got["test/eq_viol_worst"] <= 1e-9
        assert math.isfinite(got["offline/t_star"])
    if method in SOLVER_TOL:
        assert got["test/ineq_viol_worst"] <= 1e-5 and got["test/eq_viol_worst"] <= 1e-6
    if method == "pinet":  # the output is the equality projection of DR's sequence: equalities to rounding
        assert got["test/eq_viol_worst"] <= 1e-12 and got["test/iterations"] == cfg.method.n_iter_test
    if method in {"proposed", "proposed_nopretrain", "proposed_refined"}:
        assert 0.0 <= got["test/alpha_one_frac"] <= 1.0


@pytest.mark.parametrize("method", ED_METHODS)
def test_economic_dispatch_methods_write_a_full_row(workdir, method):
    """problem=ed (PGLearn's economic dispatch, case14): E2ELR exact on balance and bounds with the line rows held
    by the slack, the proposed method exact on every row, LDF's violations recorded as measured."""
    overrides = [
        "problem=ed", "problem.case=pglib_opf_case14_ieee", f"method={method.split('+')[0]}", "trainer=fast", "progress=false",
        *(["++method.slack_repair=true"] if method.endswith("slack_repair") else []),  # ed_proposed.yaml sets it (both)
        "data.val_size=16", "data.test_size=16", "eval.throughput_batch=64", "eval.warmup=1",
        f"cache_dir={workdir / 'cache'}", f"results_dir={workdir}",
    ]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    row = harness.run(cfg, workdir / f"ed-{method.replace('+', '-')}")
    assert row is not None
    table = results.load_records(workdir)
    got = table[table["config_hash"] == row["config_hash"]].iloc[0]
    assert got["status"] == "ok" and got["problem"] == "ed_case14_ieee"
    for key in ("test/gap_mean", "test/eq_viol_worst", "test/ineq_viol_worst", "test/time_ms"):
        assert math.isfinite(got[key]), key
    if method != "ldf":
        assert got["test/eq_viol_worst"] <= 1e-12 and got["test/ineq_viol_worst"] <= 1e-12
    else:  # nothing promised: the measured violations, whatever they are, not rounded to zero
        assert got["test/eq_viol_worst"] > 0
        assert got["variant"] == "supervised derived slack"  # conf/problem_method/ed_ldf.yaml
