"""The sparse rule solver (the whole robust LP in the grid's variables, HiGHS IPX) against the interior point of
``robust_lp`` (Clarabel) and the structured solver, with the same independent verification of every rule."""

from __future__ import annotations

import numpy as np
import pytest
from test_rule_solver_reduced import T_REL, _check_rule, _problem

from hardlinear.problems import build_problem
from hardlinear.rules.reduced import solve_robust_lp_reduced
from hardlinear.rules.robust_lp import row_weights, solve_robust_lp
from hardlinear.rules.robust_lp_sparse import solve_robust_lp_sparse, sparse_lp_nonzeros


@pytest.mark.parametrize("form", ["standard", "inequality"])
# dcopf_118 (about 30 s a form on 2 cores) runs with `make test-slow`; 14-57 buses cover the same code by default
@pytest.mark.parametrize("name", ["dcopf_14", "dcopf_30", "dcopf_57", pytest.param("dcopf_118", marks=pytest.mark.slow)])
def test_sparse_solver_matches_the_interior_point(name, form):
    problem = _problem(name, form)
    w = row_weights(problem.compact.H, form)
    new = solve_robust_lp_sparse(problem.compact, w)
    old = solve_robust_lp(problem.compact, w, "clarabel")
    assert new.t_star > 0 and new.solver == "sparse"
    assert new.t_star == pytest.approx(old.t_star, rel=T_REL)
    assert new.t_star <= new.info["t_lp"] * (1 + 1e-6)  # the verified margin never exceeds the LP's own t
    assert new.info["nnz"] <= sparse_lp_nonzeros(problem.compact)  # auto's estimate bounds the LP it builds
    _check_rule(problem, new)


@pytest.mark.slow
@pytest.mark.parametrize("form", ["standard", "inequality"])
@pytest.mark.parametrize("name", ["dcopf_200", "pglib_opf_case300_ieee:0.1"])
def test_sparse_solver_matches_the_interior_point_on_larger_cases(name, form):
    problem = _problem(name, form)
    w = row_weights(problem.compact.H, form)
    new = solve_robust_lp_sparse(problem.compact, w)
    old = solve_robust_lp(problem.compact, w, "clarabel")
    assert new.t_star == pytest.approx(old.t_star, rel=T_REL)
    _check_rule(problem, new)


@pytest.mark.parametrize("inputs", ["zones", "areas"])
def test_sparse_and_structured_solvers_agree_on_aggregated_inputs(inputs):
    """Zone / area inputs, the sparse solver's use case (few inputs on a large grid), on case200_activ."""
    problem = build_problem("dcopf", case="pglib_opf_case200_activ", uncertainty=0.1, inputs=inputs, form="inequality")
    w = row_weights(problem.compact.H, "inequality")
    sparse = solve_robust_lp_sparse(problem.compact, w)
    structured = solve_robust_lp_reduced(problem.compact, w)
    assert sparse.info["active_inputs"] == problem.compact.k
    assert sparse.t_star == pytest.approx(structured.t_star, rel=T_REL)
    _check_rule(problem, sparse)


def test_a_fixed_input_keeps_its_nominal_column():
    """An input with zero radius (lo == hi) moves nothing in the LP; the rule still meets the equalities for it,
    and agrees with Clarabel's, which drops the same column."""
    import hardlinear

    rng = np.random.default_rng(3)
    n, k = 5, 3
    H = np.vstack([np.eye(n), -np.eye(n)])
    h = (np.ones(2 * n), 0.1 * rng.standard_normal((2 * n, k)))
    G = np.ones((1, n))
    target = hardlinear.LinearConstraints(
        lo=np.array([-1.0, 0.5, -1.0]), hi=np.array([1.0, 0.5, 1.0]), H=H, h=h, G=G, g=(np.zeros(1), 0.2 * np.ones((1, k)))
    )
    w = row_weights(target.compact.H, "standard")
    new = solve_robust_lp_sparse(target.compact, w)
    old = solve_robust_lp(target.compact, w, "clarabel")
    assert new.info["active_inputs"] == 2
    assert new.t_star == pytest.approx(old.t_star, rel=T_REL)
    assert np.abs(target.compact.G @ new.F - target.compact.B_eq).max() <= 1e-9


@pytest.mark.parametrize("name", ["dcopf_14", "dcopf_57", pytest.param("dcopf_118", marks=pytest.mark.slow)])  # 118: ~90 s
def test_sparse_level_lp_matches_the_exact_level(name):
    """The largest uncertainty level by the sparse level LP equals the row-generated one of robust_lp (Clarabel),
    and the rule at 99 % of it has a positive margin while one at 101 % has none."""
    from hardlinear.rules import max_uncertainty_exact

    problem = build_problem(name, form="inequality")
    sparse = max_uncertainty_exact(problem, solver="sparse")
    clarabel = max_uncertainty_exact(problem, solver="clarabel")
    assert sparse == pytest.approx(clarabel, rel=1e-5)
    below = build_problem(name, form="inequality", uncertainty=0.99 * sparse)
    above = build_problem(name, form="inequality", uncertainty=1.01 * sparse)
    w = row_weights(below.compact.H, "inequality")
    assert solve_robust_lp_sparse(below.compact, w).t_star > 0
    assert solve_robust_lp_sparse(above.compact, w).t_star <= 0
