"""Issue 44 item 9: a problem file may name its variables and rows, and messages read the names (the decision
rule's binding row said ``row 21: -1 y[14] <= -0``, which a user had to decode by hand)."""

from __future__ import annotations

import numpy as np
import pytest
from test_linear_problem import small_arrays

from hardlinear.problems import build_problem
from hardlinear.rules.decision_rule import describe_row, solve_decision_rule

NAMES = {
    "variable_names": np.array([f"gen{j}" for j in range(6)]),
    "eq_names": np.array(["balance"]),
    "ineq_names": np.array([f"gen{j}_max" for j in range(6)] + [f"gen{j}_min" for j in range(6)] + ["line_a", "line_b"]),
}


def test_npz_names_reach_the_rules_binding_row(tmp_path):
    np.savez(tmp_path / "named.npz", **small_arrays(), **NAMES)
    problem = build_problem("linear", path=str(tmp_path / "named.npz"))
    assert problem.variable_names == [f"gen{j}" for j in range(6)] and problem.eq_names == ["balance"]
    assert describe_row(problem, 12).startswith("row 12 (line_a): ")
    assert "y[" not in describe_row(problem, 12) and "gen" in describe_row(problem, 12)
    assert describe_row(problem, 0) == "row 0 (gen0_max): +1 gen0 <= 2"
    rule = solve_decision_rule(problem, cache_dir=tmp_path / "cache", progress=False)
    row = rule.binding_row
    assert rule.binding_description.startswith(f"row {row} ({NAMES['ineq_names'][row]}): ")
    # names change no result: the same arrays without them give the same rule
    unnamed = build_problem("linear", arrays=small_arrays())
    assert unnamed.constraints_fingerprint() == problem.constraints_fingerprint()
    assert describe_row(unnamed, 0) == "row 0: +1 y[0] <= 2"


@pytest.mark.parametrize(("change", "message"), [
    ({"variable_names": np.array(["a", "b"])}, r"variable_names must name each of the n variables: shape \(6,\); got \(2,\)"),
    ({"ineq_names": np.arange(14)}, r"ineq_names must be a 1-D array of strings"),
    ({"eq_names": np.array([["a"]])}, r"eq_names must be a 1-D array of strings .* shape \(1, 1\)"),
])
def test_bad_names_name_the_fix(tmp_path, change, message):
    np.savez(tmp_path / "bad.npz", **small_arrays(), **change)
    with pytest.raises(ValueError, match=message):
        build_problem("linear", path=str(tmp_path / "bad.npz"))
