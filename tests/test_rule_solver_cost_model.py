"""``rule_solver=auto`` by a cost model fitted to measurements (hardlinear.rules.solver_choice): the constants are
the committed fit of the committed benchmark data, the choice follows the predictions, and the case that stalled
on Clarabel (case240_pserc at 2 %, issue 31) goes to the solver measured fastest there."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from hardlinear.rules import solver_choice
from hardlinear.rules.solver_choice import COST_MODEL, choose, predicted_seconds

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "results" / "bench"
DATA = [BENCH / "rule_solvers.json", BENCH / "rule_solvers_small.json"]  # the model's fit data (a loaded machine)
QUIET = sorted(BENCH.glob("rule_solvers_quiet*.json")) + sorted(BENCH.glob("rule_solvers_large_*.json"))  # a quiet one


def _bench():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_rule_solvers

    return bench_rule_solvers


def test_the_constants_are_the_fit_of_the_committed_measurements():
    fit = _bench().fit_cost_model([json.loads(p.read_text()) for p in DATA])
    committed = json.loads((BENCH / "rule_solver_cost_model.json").read_text())["model"]
    for solver, (a, b) in COST_MODEL.items():
        assert fit[solver]["a"] == pytest.approx(a, abs=1e-9) and fit[solver]["b"] == pytest.approx(b, abs=1e-9), solver
        assert committed[solver]["a"] == pytest.approx(a, abs=1e-9), solver
        # the model never predicts less than the budget where a solve ran past it
        for bound in fit[solver]["lower_bounds"]:
            assert a + b * math.log10(bound["size"]) >= math.log10(bound["seconds"]) - 1e-9


@pytest.mark.parametrize(
    ("data", "misses"),
    # the quiet sweep's one miss, named: case39_epri, sparse 0.38 s against reduced 0.19 s in one draw (1.2-1.9x in
    # three repeats, results/bench/rule_solvers_repeats/; benchmarks/README.md says so)
    [(DATA, set()), (QUIET, {"pglib_opf_case39_epri"})],
    ids=["fit-data", "quiet-sweep"],
)
def test_auto_is_within_2x_of_the_fastest_measured_wherever_its_choice_was_measured(data, misses):
    """On the fit data, and on the quiet machine's sweep that the model never saw (issue 31's second pass)."""
    table = _bench().case_table([json.loads(p.read_text()) for p in data])
    measured = [e for e in table if e["auto_over_fastest"] is not None]
    assert len(measured) >= 10
    slow = {e["case"]: round(e["auto_over_fastest"], 2) for e in measured if e["auto_over_fastest"] > 2.0}
    slow |= {e["case"]: "auto's choice ran past its budget" for e in table if e["auto_missed"]}
    assert set(slow) == misses, slow
    # and t* agrees across the solvers that finished, case by case
    assert all(e["t_star_agree"] for e in table), [(e["case"], e["t_star_rel_spread"]) for e in table if not e["t_star_agree"]]


def test_choice_follows_the_predictions():
    model = {"clarabel": (0.0, 1.0), "highs": (0.0, 1.0), "sparse": (0.0, 1.0), "reduced": (0.0, 1.0)}
    f = {"m_ineq": 100, "k": 9, "sparse_lp_nnz": 10_000, "active_inputs": 2, "null_dim": 5}  # sizes 1000, 1e4, 1000
    solver, predicted = choose(f, ("sparse", "reduced"), model)
    assert predicted == pytest.approx({"reduced": 1000.0, "sparse": 10_000.0}) and solver == "reduced"
    assert choose(f, ("sparse",), model)[0] == "sparse"
    with pytest.raises(ValueError, match="no rule solver"):
        choose(f, (), model)
    assert predicted_seconds(f, "clarabel", model) == pytest.approx(1000.0)


def test_case240_goes_to_the_solver_measured_fastest(caplog):
    """The case of the issue: auto chose Clarabel (20 min, 3.2 GB, unfinished); the model's choice is measured."""
    import logging

    from hardlinear.problems import build_problem
    from hardlinear.rules.decision_rule import _resolve_solver

    problem = build_problem("dcopf", case="pglib_opf_case240_pserc", uncertainty=0.02)
    caplog.set_level(logging.INFO, logger="hardlinear.rules.decision_rule")
    solver = _resolve_solver(problem, "auto")
    row = next(e for e in _bench().case_table([json.loads(p.read_text()) for p in DATA]) if e["case"] == "pglib_opf_case240_pserc")
    assert solver == row["auto"] == row["fastest"]
    assert any("rule_solver=auto" in r.getMessage() and f"-> {solver}" in r.getMessage() for r in caplog.records)
    assert _resolve_solver(problem, "auto", "cost") == "clarabel"  # the structured solvers have no cost rule
    assert solver_choice.rule_features(problem)["m_ineq"] == problem.compact.m_ineq
