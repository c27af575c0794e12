"""Free slack columns out of the robust LP (hardlinear.rules.free_slack): which columns qualify, the same margin
as the whole LP, a completed rule that holds every row, and where the elimination must not apply."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from test_rule_solver_reduced import _check_rule

from hardlinear.constraints.family import InputBox, JointlyLinearFamily
from hardlinear.problems import build_problem
from hardlinear.rules import solve_decision_rule
from hardlinear.rules.free_slack import complete_rule, eliminate_free_slacks, free_slack_columns
from hardlinear.rules.robust_lp import RuleSolution, row_weights, solve_robust_lp, verified_row_margins


def _family(H: np.ndarray, G: np.ndarray, k: int = 2, seed: int = 0) -> JointlyLinearFamily:
    rng = np.random.default_rng(seed)
    B_ineq = np.c_[np.full(H.shape[0], 2.0), 0.1 * rng.standard_normal((H.shape[0], k))]
    B_eq = np.c_[np.ones(G.shape[0]), 0.1 * rng.standard_normal((G.shape[0], k))]
    return JointlyLinearFamily(box=InputBox.symmetric(k), G=sp.csr_matrix(G), B_eq=B_eq, H=sp.csr_matrix(H), B_ineq=B_ineq)


def test_only_columns_that_relax_every_row_and_touch_no_equality_qualify():
    # columns: 0 a decision, 1 a free slack, 2 in an equality, 3 with a positive entry, 4 in no row at all
    H = np.array([[1.0, -1.0, 0.0, 0.0, 0.0], [-1.0, 0.0, -1.0, 0.0, 0.0], [0.0, -2.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, -1.0, 0.0]])
    G = np.array([[1.0, 0.0, 1.0, 0.0, 0.0]])
    assert free_slack_columns(_family(H, G)).tolist() == [1]


def test_the_margin_equals_the_whole_lps_and_the_completed_rule_holds_every_row():
    # x, y decisions with a balance, bounds on each; two slack-relaxed coupling rows and the slacks' own rows
    H = np.array([
        [1.0, 0.0, 0.0, 0.0], [-1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, -1.0, 0.0, 0.0],
        [3.0, -1.0, -1.0, 0.0], [-3.0, 1.0, -0.5, -2.0], [0.0, 0.0, -1.0, 0.0], [0.0, 0.0, 0.0, -1.0],
    ])
    G = np.array([[1.0, 1.0, 0.0, 0.0]])
    family = _family(H, G)
    elimination = eliminate_free_slacks(family)
    assert elimination.slack_columns.tolist() == [2, 3]
    assert elimination.kept_rows.tolist() == [0, 1, 2, 3] and elimination.dropped_rows.tolist() == [4, 5, 6, 7]
    for form in ("standard", "inequality"):
        w = row_weights(family.H, form)
        whole = solve_robust_lp(family, w, "clarabel")
        small = solve_robust_lp(elimination.family, w[elimination.kept_rows], "clarabel")
        assert small.t_star == pytest.approx(whole.t_star, rel=1e-7)
        F = complete_rule(elimination, family, small.F, small.t_star, w)
        margins = verified_row_margins(F, family.H, family.B_ineq, family.box, w)
        assert np.abs(family.G @ F - family.B_eq).max() <= 1e-9
        assert margins.min() >= small.t_star * (1 - 1e-12)  # the dropped rows meet the margin too
        assert np.argmin(margins) in elimination.kept_rows  # and none of them binds
        assert np.all(F[elimination.slack_columns, 1:] == 0)  # the slacks come back as constants


def test_a_completion_rounds_towards_feasibility():
    """A dropped row's requirement gets a pad: with ``t = 0`` the completed slack rows still read >= 0 exactly."""
    H = np.array([[1.0, 0.0], [-1.0, 0.0], [1e8, -1.0], [0.0, -1.0]])
    family = _family(H, np.array([[1.0, 0.0]]))
    elimination = eliminate_free_slacks(family)
    w = row_weights(family.H, "standard")
    F_kept = np.array([[1.0 / 3.0, 0.1, -0.1]])
    F = complete_rule(elimination, family, F_kept, 0.0, w)
    assert verified_row_margins(F, family.H, family.B_ineq, family.box, w)[2:].min() >= 0.0


def test_nothing_is_eliminated_without_a_free_slack_or_without_rows_left():
    assert eliminate_free_slacks(build_problem("dcopf_14").compact) is None  # hard line limits: no slack
    H = np.array([[1.0, -1.0], [0.0, -1.0]])  # every row holds the slack: nothing left to solve
    assert eliminate_free_slacks(_family(H, np.array([[1.0, 0.0]]))) is None


@pytest.mark.parametrize("case", ["pglib_opf_case14_ieee", "pglib_opf_case30_ieee"])
def test_economic_dispatch_rule_without_its_thermal_slack_matches_the_whole_lp(case):
    ed = build_problem("ed", case=case)
    rule = solve_decision_rule(ed)
    ne = len(ed.limited)
    assert rule.info["free_slacks"] == ne and rule.info["rows_with_free_slacks"] == 3 * ne
    whole = solve_robust_lp(ed.compact, row_weights(ed.compact.H, ed.form), "clarabel")
    assert rule.t_star == pytest.approx(whole.t_star, rel=1e-7)
    F = rule.F.numpy()
    margins = verified_row_margins(F, ed.compact.H, ed.compact.B_ineq, ed.compact.box, row_weights(ed.compact.H, ed.form))
    _check_rule(ed, RuleSolution(F, float(margins.min()), margins, "", "", 0.0))


def test_the_cost_rule_keeps_the_whole_lp():
    ed = build_problem("ed", case="pglib_opf_case14_ieee")
    rule = solve_decision_rule(ed, rule_objective="cost")
    assert "free_slacks" not in rule.info
