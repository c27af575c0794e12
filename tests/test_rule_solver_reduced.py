"""The reduced rule solver (structured interior point on a sparse elimination) against the interior point of
``robust_lp``, its independent verification, and the zone / area inputs of DC-OPF."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from hardlinear.problems import build_problem
from hardlinear.rules import solve_decision_rule
from hardlinear.rules.reduced import reduce_sparse, solve_robust_lp_reduced, verified_row_margins_chunked
from hardlinear.rules.robust_lp import row_weights, solve_robust_lp, verified_row_margins

T_REL = 1e-6  # relative agreement of the verified margins of the two solvers
EQ_TOL = 1e-9  # relative residual of G F = B_eq
SAMPLE_TOL = 1e-9  # sampled weighted slack below the verified margin


def _problem(name: str, form: str):
    if name.startswith("pglib_opf_"):
        case, _, level = name.partition(":")
        return build_problem("dcopf", case=case, uncertainty=float(level), form=form)
    return build_problem(name, form=form)


def _check_rule(problem, sol) -> None:
    """Independent of the solver: equalities coefficient-wise, every row's worst case (recomputed here with the
    unchunked closed form) equal to the reported margins, and sampled inputs and box vertices no worse."""
    compact = problem.compact
    w = row_weights(compact.H, problem.form)
    F = sol.F
    assert np.abs(compact.G @ F - compact.B_eq).max() / (1.0 + np.abs(compact.B_eq).max()) <= EQ_TOL
    margins = verified_row_margins(F, compact.H, compact.B_ineq, compact.box, w)
    np.testing.assert_allclose(sol.row_margins, margins, rtol=0, atol=1e-12)
    assert sol.t_star == pytest.approx(margins.min(), abs=1e-15)
    gen = torch.Generator().manual_seed(0)
    xi = torch.cat([problem.sample(2000, gen), compact.box.vertices(limit=2048, generator=gen)])
    y = torch.as_tensor(np.asarray(F)) @ torch.cat([torch.ones(len(xi), 1, dtype=xi.dtype), xi], 1).T
    slack = -compact.ineq_resid(xi, y.T) / torch.as_tensor(w)
    assert slack.min().item() >= sol.t_star - SAMPLE_TOL


@pytest.mark.parametrize("form", ["standard", "inequality"])
@pytest.mark.parametrize("name", ["dcopf_14", "dcopf_30", "dcopf_57"])
def test_reduced_solver_matches_the_interior_point(name, form):
    problem = _problem(name, form)
    w = row_weights(problem.compact.H, form)
    new = solve_robust_lp_reduced(problem.compact, w)
    old = solve_robust_lp(problem.compact, w, "clarabel")
    assert new.t_star > 0 and new.solver == "reduced"
    assert new.t_star == pytest.approx(old.t_star, rel=T_REL)
    _check_rule(problem, new)
    assert new.info["elimination"] == "sparse-lu"


@pytest.mark.slow
@pytest.mark.parametrize("form", ["standard", "inequality"])
@pytest.mark.parametrize("name", ["dcopf_118", "dcopf_200", "pglib_opf_case300_ieee:0.1", "pglib_opf_case500_goc:0.05"])
def test_reduced_solver_matches_the_interior_point_on_larger_cases(name, form):
    problem = _problem(name, form)
    w = row_weights(problem.compact.H, form)
    new = solve_robust_lp_reduced(problem.compact, w)
    old = solve_robust_lp(problem.compact, w, "clarabel")
    assert new.t_star == pytest.approx(old.t_star, rel=T_REL)
    _check_rule(problem, new)


@pytest.mark.parametrize(("name", "null_dim"), [("dcopf_14", 1), ("dcopf_30", 1), ("dcopf_57", 3), ("dcopf_118", 18), ("dcopf_200", 31)])
def test_sparse_elimination_has_the_free_dimension_of_the_equalities(name, null_dim):
    problem = build_problem(name)
    compact = problem.compact
    sr = reduce_sparse(compact, row_weights(compact.H, "standard"))
    N = sr.red.N
    assert sr.method == "sparse-lu"
    assert N.shape[1] == null_dim == compact.n - np.linalg.matrix_rank(compact.G.toarray())
    assert np.abs(compact.G @ N).max() <= 1e-10
    np.testing.assert_allclose(N.T @ N, np.eye(null_dim), atol=1e-10)


def test_chunked_verification_equals_the_closed_form():
    problem = build_problem("dcopf_30", form="inequality")
    compact = problem.compact
    w = row_weights(compact.H, "inequality")
    F = np.random.default_rng(0).standard_normal((compact.n, compact.k + 1))
    np.testing.assert_allclose(
        verified_row_margins_chunked(F, compact.H, compact.B_ineq, compact.box, w, chunk=7),
        verified_row_margins(F, compact.H, compact.B_ineq, compact.box, w),
        rtol=1e-13,
        atol=1e-12,
    )


@pytest.mark.parametrize("inputs", ["zones", "areas"])
def test_zone_and_area_inputs_aggregate_the_loaded_buses(inputs):
    case = "pglib_opf_case200_activ"
    loaded = build_problem("dcopf", case=case, uncertainty=0.1, inputs="loaded_buses").compact
    grouped = build_problem("dcopf", case=case, uncertainty=0.1, inputs=inputs)
    net = grouped.network
    labels = (net.zone if inputs == "zones" else net.area)[net.pd != 0]
    groups = np.unique(labels)
    assert grouped.compact.k == len(groups) and grouped.inputs == inputs
    assign = sp.csr_matrix((np.ones(len(labels)), (np.arange(len(labels)), np.searchsorted(groups, labels))))
    np.testing.assert_array_equal(grouped.compact.B_eq[:, 0], loaded.B_eq[:, 0])
    np.testing.assert_allclose(grouped.compact.B_eq[:, 1:], np.asarray(loaded.B_eq[:, 1:] @ assign), rtol=0, atol=0)
    rule = solve_decision_rule(grouped, solver="reduced")
    assert rule.t_star > 0 and rule.k == len(groups)


def test_expressions_and_rows_map_back_and_forth():
    from hardlinear.rules.reduced import expressions_of_rows, rows_of_expressions

    problem = build_problem("dcopf_30", form="inequality")
    red = reduce_sparse(problem.compact, row_weights(problem.compact.H, "inequality")).red
    S = np.array([0, 3, 7, len(red.upper) - 1])
    rows = rows_of_expressions(red, S)
    assert len(rows) == len(S) + int((red.lower[S] >= 0).sum())
    np.testing.assert_array_equal(expressions_of_rows(red, rows), S)
    np.testing.assert_array_equal(expressions_of_rows(red, red.lower[S][red.lower[S] >= 0]), S[red.lower[S] >= 0])


def test_packed_blocks_factor_like_the_explicit_products():
    from hardlinear.rules.reduced import packed_outer_products
    from hardlinear.rules.reduced.interior_point import _NormalSolver, _WorkingSet

    rng = np.random.default_rng(1)
    E, d, q = 9, 4, 5
    ws = _WorkingSet(rng.standard_normal((E, d)), rng.standard_normal((E, q)), rng.uniform(1, 2, E), rng.uniform(1, 2, E), rng.uniform(0.5, 1, E), np.arange(E) % 2 == 0)
    D = {"a": rng.uniform(0.1, 5, (q, E)), "b": rng.uniform(0.1, 5, (q, E)), "up": rng.uniform(1, 2, E), "lo": rng.uniform(1, 2, int(ws.two.sum()))}
    packed = _NormalSolver(ws, D, 1e-9, 1e-8, packed_outer_products(ws.M))
    plain = _NormalSolver(ws, D, 1e-9, 1e-8, None)
    for a, b in zip(packed.factors, plain.factors):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)
    assert packed_outer_products(ws.M, budget_bytes=8) is None


def test_coarse_seed_and_zero_spread_certificate_on_a_three_area_grid():
    """case73_ieee_rts (3 areas, 51 loaded buses): the rule's row generation seeded by the area rule's working
    set, and stopped by the zero-spread bound (its t* is a generator's half-range, which no rule can beat)."""
    from hardlinear.rules.reduced import solve_with_coarse_seed

    problem = build_problem("dcopf", case="pglib_opf_case73_ieee_rts", uncertainty=0.1, inputs="loaded_buses")
    w = row_weights(problem.compact.H, "standard")
    sol = solve_with_coarse_seed(problem.compact, problem.coarse_family(), w, min_inputs=0)
    assert sol.info["coarse_seed"]["inputs"] == 3 and sol.info["coarse_seed"]["rows"] > 0
    assert sol.info["certified"] == "zero-spread bound"
    bound = sol.info["t_upper_zero_spread"]
    assert bound * (1 - 1e-7) <= sol.t_star <= bound * (1 + 1e-12)
    _check_rule(problem, sol)


@pytest.mark.slow
@pytest.mark.parametrize("form", ["standard", "inequality"])
def test_certified_rule_matches_the_interior_point(form):
    problem = build_problem("dcopf", case="pglib_opf_case73_ieee_rts", uncertainty=0.1, inputs="loaded_buses", form=form)
    w = row_weights(problem.compact.H, form)
    new = solve_robust_lp_reduced(problem.compact, w)
    old = solve_robust_lp(problem.compact, w, "clarabel")
    assert new.info.get("certified") == "zero-spread bound"
    assert new.t_star == pytest.approx(old.t_star, rel=T_REL)
    _check_rule(problem, new)


@pytest.mark.parametrize(("name", "form", "lp_solver"), [("dcopf_30", "inequality", "highs"), ("dcopf_57", "standard", "highs"), ("dcopf_57", "inequality", "clarabel")])
def test_sparse_working_sets_match_the_interior_point(name, form, lp_solver, monkeypatch):
    """The working sets solved in the grid's own variables (``working_sets="sparse"``), by HiGHS or Clarabel, give
    the interior point's margin, and the rule passes the independent checks."""
    import hardlinear.rules.reduced.row_generation as row_generation

    monkeypatch.setattr(row_generation, "SPARSE_LP_SOLVERS", (lp_solver,))  # read by solve_working_set_sparse there
    problem = _problem(name, form)
    w = row_weights(problem.compact.H, form)
    new = solve_robust_lp_reduced(problem.compact, w, working_sets="sparse")
    old = solve_robust_lp(problem.compact, w, "clarabel")
    assert new.info["working_set_solver"] == "sparse"
    assert all(status.startswith(lp_solver) for status in new.info["sparse_lp_status"])
    assert new.t_star == pytest.approx(old.t_star, rel=T_REL)
    _check_rule(problem, new)
    with pytest.raises(ValueError, match="working_sets"):
        solve_robust_lp_reduced(problem.compact, w, working_sets="dense")


def test_offset_lp_in_grid_variables_equals_the_dense_one():
    """``_best_offset`` by the sparse LP in ``y`` and by the dense LP in ``W_0``: same optimum, over every
    expression and over a subset, with zero and with random spreads."""
    from hardlinear.rules.reduced.certification import _best_offset

    problem = build_problem("dcopf_57", form="inequality")
    red = reduce_sparse(problem.compact, row_weights(problem.compact.H, "inequality")).red
    assert red.offset_lp is not None
    rng = np.random.default_rng(0)
    E = len(red.w)
    for spread, rows in ((np.zeros(E), None), (rng.uniform(0, 0.01, E), None), (np.zeros(E), rng.choice(E, 40, replace=False))):
        sparse_lp = _best_offset(red, spread, rows)
        lp, red.offset_lp = red.offset_lp, None
        dense_lp = _best_offset(red, spread, rows)
        red.offset_lp = lp
        assert sparse_lp[1] == pytest.approx(dense_lp[1], rel=1e-8, abs=1e-10)
        sel = np.arange(E) if rows is None else rows  # the offset is feasible for its LP
        two = red.lower[sel] >= 0
        MW = red.M[sel] @ sparse_lp[0]
        assert np.all(MW + red.w[sel] * sparse_lp[1] <= red.R_up[sel] - spread[sel] + 1e-8)
        assert np.all(-MW[two] + red.w[sel][two] * sparse_lp[1] <= red.R_lo[sel][two] - spread[sel][two] + 1e-8)


def test_working_set_smaller_than_the_null_space_is_solved_in_its_span():
    """A working set of fewer expressions than ``d`` written in a basis of its rows' span: the same margin as in
    all ``d`` coordinates, and the same rule (the proximal term zeroes the rest)."""
    from hardlinear.rules.reduced import solve_working_set
    from hardlinear.rules.reduced.interior_point import _WorkingSet
    from hardlinear.rules.reduced.row_generation import _full_rule, _working_set

    problem = build_problem("dcopf_200", form="inequality")
    red = reduce_sparse(problem.compact, row_weights(problem.compact.H, "inequality")).red
    d, q = red.M.shape[1], red.C.shape[1]
    halfrange = np.where(red.lower >= 0, (red.R_up + red.R_lo) / 2, red.R_up) / red.w
    S = np.sort(np.argsort(halfrange)[: d // 2])
    ws, basis = _working_set(red, S)
    assert basis is not None and ws.M.shape == (len(S), len(S))
    full = _WorkingSet(red.M[S], red.C[S], red.R_up[S], red.R_lo[S], red.w[S], red.lower[S] >= 0)
    x_small, t_small, _ = solve_working_set(ws)
    x_full, t_full, _ = solve_working_set(full)
    assert t_small == pytest.approx(t_full, rel=1e-7)
    np.testing.assert_allclose(_full_rule(x_small, basis, q), _full_rule(x_full, None, q), rtol=0, atol=1e-5 * (1 + np.abs(_full_rule(x_full, None, q)).max()))


def test_a_proximal_term_that_weighs_on_the_margin_is_named_or_shrunk_until_the_rule_is_optimal(caplog):
    """The working-set LP's ``(eps/2) ||W||^2`` trades margin for a smaller rule (case9241_pegase: 2.3 % short at
    the default eps). Here eps 1e-3 at case118: by default the rule is short and the solve warns with the share;
    with ``exact_optimum`` the final working set is solved again with eps shrunk, and the margin is Clarabel's."""
    import logging

    from hardlinear.rules.reduced.settings import PROXIMAL_SHARE

    problem = _problem("dcopf_118", "standard")
    w = row_weights(problem.compact.H, "standard")
    old = solve_robust_lp(problem.compact, w, "clarabel")
    with caplog.at_level(logging.WARNING, logger="hardlinear.rules.reduced"):
        short = solve_robust_lp_reduced(problem.compact, w, regularization=1e-3)
    assert short.info["proximal_share"] > PROXIMAL_SHARE and "proximal_resolves" not in short.info
    assert 0 < short.t_star < old.t_star * (1 - 1e-3)  # safe, and short by more than the share's scale
    assert "may be below the LP's optimum" in caplog.text and "exact_optimum=True" in caplog.text
    _check_rule(problem, short)
    exact = solve_robust_lp_reduced(problem.compact, w, regularization=1e-3, exact_optimum=True)
    assert exact.info["proximal_resolves"] >= 1 and exact.info["proximal_share"] <= PROXIMAL_SHARE
    assert exact.t_star == pytest.approx(old.t_star, rel=T_REL)
    _check_rule(problem, exact)
