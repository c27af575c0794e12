"""The robust LP whose inputs enter through one functional (hardlinear.rules.rank_one): the same t* as the LP over
every input, a lifted rule that holds every row, and refusals where the structure does not hold."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from hardlinear.constraints.family import InputBox, JointlyLinearFamily
from hardlinear.problems import build_problem
from hardlinear.rules import DecisionRuleInfeasible, solve_decision_rule
from hardlinear.rules.rank_one import NotRankOne, rank_one_inputs, solve_rank_one
from hardlinear.rules.robust_lp import row_weights, solve_robust_lp, verified_row_margins


def _dispatch_like(seed: int, k: int = 5, n: int = 4, extra_row: np.ndarray | None = None) -> JointlyLinearFamily:
    """n generators with random limits and one balance whose right-hand side is a' xi (a of mixed signs), over a
    box of unequal radii; a coupling row whose right-hand side moves with the same functional."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.2, 1.5, k) * rng.choice([-1.0, 1.0], k)
    lo, hi = rng.uniform(0.0, 0.5, n), rng.uniform(2.0, 4.0, n)
    coupling = rng.standard_normal(n)
    H = np.vstack([np.eye(n), -np.eye(n), coupling])
    B_var = np.vstack([np.zeros((2 * n, k)), 0.3 * a])
    if extra_row is not None:  # a row moved by another direction: rank two
        H = np.vstack([H, coupling])
        B_var = np.vstack([B_var, extra_row])
    B_ineq = np.c_[np.r_[hi, -lo, 3.0, [3.0] * (extra_row is not None)], B_var]
    box = InputBox(rng.uniform(-1.0, 0.0, k), rng.uniform(0.5, 2.0, k))
    total = float(np.sum(lo + hi)) / 2
    return JointlyLinearFamily(box=box, G=sp.csr_matrix(np.ones((1, n))), B_eq=np.c_[[total - a @ box.mid], [a]], H=sp.csr_matrix(H), B_ineq=B_ineq)


@pytest.mark.parametrize("seed", range(4))
def test_the_one_input_lp_has_the_whole_lps_margin_and_its_lifted_rule_holds_every_row(seed):
    """Four random dispatch-like LPs: t* through one input equals Clarabel's over every input (without row
    generation: the whole LP), and the lifted rule's margins, recomputed here, are t* on every row or more."""
    family = _dispatch_like(seed)
    weights = row_weights(family.H, "inequality")
    whole = solve_robust_lp(family, weights, "clarabel", row_generation=False)
    one = solve_rank_one(family, weights)
    assert whole.t_star > 0
    assert one.t_star == pytest.approx(whole.t_star, rel=1e-7, abs=1e-9)
    margins = verified_row_margins(one.F, family.H, family.B_ineq, family.box, weights)
    assert margins.min() >= one.t_star - 1e-12
    assert np.abs(family.G @ one.F - family.B_eq).max() < 1e-12
    # the lifted rule responds to the inputs through a' xi alone: its input columns are multiples of a
    a = family.B_eq[0, 1:]
    assert np.allclose(np.outer(one.F[:, 1:] @ a / (a @ a), a), one.F[:, 1:], atol=1e-12)
    # and its outputs are feasible at the box's corners and at random inputs, in float64
    rng = np.random.default_rng(seed)
    xi = np.vstack([family.box.lo, family.box.hi, rng.uniform(family.box.lo, family.box.hi, (64, family.k))])
    y = np.c_[np.ones(len(xi)), xi] @ one.F.T
    xt, yt = torch.from_numpy(xi), torch.from_numpy(y)
    assert float(family.ineq_resid(xt, yt).max()) <= 0.0
    assert float(family.eq_resid(xt, yt).abs().max()) < 1e-12


@pytest.mark.parametrize("seed", range(3))
def test_over_an_input_polytope_the_margin_is_the_whole_lps_too(seed):
    """A random polytope cutting the box (rows that couple the inputs): rank_one's t*, through a' xi's certified
    range, equals Clarabel's on the polytope LP; its margins hold at points sampled inside."""
    from hardlinear.constraints.polytope import make_input_set

    base = _dispatch_like(seed)
    rng = np.random.default_rng(10 + seed)
    A = rng.standard_normal((6, base.k))
    inside = rng.uniform(base.box.lo, base.box.hi) * 0.3 + 0.35 * (base.box.lo + base.box.hi)
    polytope, lo, hi = make_input_set(A, A @ inside + rng.uniform(0.1, 0.5, 6), base.box.lo, base.box.hi)
    family = JointlyLinearFamily(box=InputBox(lo, hi), G=base.G, H=base.H, B_eq=base.B_eq, B_ineq=base.B_ineq, polytope=polytope)
    weights = row_weights(family.H, "inequality")
    whole = solve_robust_lp(family, weights, "clarabel")
    one = solve_rank_one(family, weights)
    assert one.t_star == pytest.approx(whole.t_star, rel=1e-7, abs=1e-9)
    assert one.t_star >= solve_rank_one(JointlyLinearFamily(box=family.box, G=base.G, H=base.H, B_eq=base.B_eq, B_ineq=base.B_ineq), weights).t_star - 1e-9
    xi = polytope.sample(256, lo, hi, seed=seed)
    residual = family.ineq_resid(torch.from_numpy(xi), torch.from_numpy(np.c_[np.ones(len(xi)), xi] @ one.F.T))
    assert float((residual / torch.from_numpy(weights)).max()) <= -one.t_star + 1e-12


def test_a_second_input_direction_is_refused_naming_the_fix():
    family = _dispatch_like(0, extra_row=np.array([1.0, 0.0, 0.0, 0.0, 0.0]))
    assert rank_one_inputs(family) is None
    with pytest.raises(NotRankOne, match="rule_solver='auto'"):
        solve_rank_one(family, row_weights(family.H, "inequality"))


def test_no_moving_input_is_not_rank_one():
    family = _dispatch_like(1)
    fixed = JointlyLinearFamily(box=family.box, G=family.G, H=family.H, B_eq=np.c_[family.B_eq[:, 0], np.zeros((1, family.k))], B_ineq=np.c_[family.B_ineq[:, 0], np.zeros((family.m_ineq, family.k))])
    assert rank_one_inputs(fixed) is None
    assert rank_one_inputs(family).interval.k == 1


@pytest.mark.parametrize("case", ["pglib_opf_case14_ieee", "pglib_opf_case57_ieee", "pglib_opf_case118_ieee"])
@pytest.mark.parametrize("form", ["standard", "inequality"])
def test_the_economic_dispatch_rule_through_the_total_load_matches_the_sparse_solver(case, form):
    """PGLearn's dispatch: once the thermal slacks are out, the loads enter the balance alone. rank_one's t* is the
    sparse solver's (HiGHS on the whole LP) to Clarabel's accuracy, and its rule is verified over every row,
    thermal rows included."""
    problem = build_problem("ed", case=case, form=form)
    rank_one = solve_decision_rule(problem, solver="rank_one")
    sparse = solve_decision_rule(problem, solver="sparse")
    assert rank_one.info["solver"] == "rank_one" and rank_one.info["rank_one"]
    assert rank_one.t_star == pytest.approx(sparse.t_star, rel=1e-8)
    assert rank_one.info["inputs"] == problem.compact.box.k and rank_one.info["free_slacks"] > 0


def test_dc_opf_is_refused_before_any_lp_is_solved():
    """DC-OPF's loads move every line row through the PTDF: many directions. The refusal names the fix."""
    with pytest.raises(NotRankOne, match="use rule_solver='auto'"):
        solve_decision_rule(build_problem("dcopf_14"), solver="rank_one")


def test_case89s_box_has_no_rule_and_the_error_gives_the_largest_level_by_bisection():
    """case89's full box has no rule (t* = -0.199, test_ed.py); with rank_one the search for the largest level bisects
    with rank_one solves, and lands within the bisection's tolerance of the sparse solver's exact level."""
    problem = build_problem("ed", case="pglib_opf_case89_pegase")
    with pytest.raises(DecisionRuleInfeasible) as err:
        solve_decision_rule(problem, solver="rank_one")
    assert "bisection" in str(err.value)
    with pytest.raises(DecisionRuleInfeasible) as exact:
        solve_decision_rule(problem, solver="sparse")
    assert err.value.max_uncertainty == pytest.approx(exact.value.max_uncertainty, abs=1e-3)


def test_auto_names_rank_one_where_it_predicts_a_slow_solve(monkeypatch, caplog):
    """auto keeps its choice (the recorded rules came from it) but says where rank_one applies and auto's solver is
    predicted slow; not where the structure is absent."""
    import logging

    from hardlinear.rules import decision_rule

    monkeypatch.setattr(decision_rule, "RANK_ONE_HINT_S", 0.0)
    with caplog.at_level(logging.WARNING, logger="hardlinear.rules.decision_rule"):
        assert decision_rule._auto_solver(build_problem("ed", case="pglib_opf_case118_ieee"), "margin") != "rank_one"
        assert "rule_solver=rank_one" in caplog.text
        caplog.clear()
        decision_rule._auto_solver(build_problem("dcopf", case="pglib_opf_case118_ieee"), "margin")
        assert "rank_one" not in caplog.text
