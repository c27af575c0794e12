"""Decision rules (the safe network): feasibility in float64, the LP's row generation against the whole LP,
the SDP's certificate, the cache, the infeasibility report, and the paper's own rules as a floor."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from shared_data import PAPER_DATA, missing_reason

from hardlinear.constraints.family import InputBox, JointlyLinearFamily
from hardlinear.problems import Portfolio, build_problem
from hardlinear.rules import DecisionRule, DecisionRuleInfeasible, max_uncertainty, solve_decision_rule
from hardlinear.rules.robust_lp import find_expression_pairs, row_weights, solve_robust_lp, verified_row_margins
from hardlinear.rules.robust_sdp import sdp_row_weights, solve_robust_sdp

EQ_TOL = 1e-9  # relative equality residual of the rule's output, float64
MARGIN_TOL = 1e-9  # sampled slack below the verified margin, float64


@pytest.fixture(scope="module")
def dcopf14():
    return {form: build_problem("dcopf_14", form=form) for form in ("standard", "inequality")}


def _inputs(problem, n: int = 3000, vertices: int = 4096) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return torch.cat([problem.sample(n, gen), problem.box.vertices(limit=vertices, generator=gen)])


def _weights(problem) -> np.ndarray:
    if problem.compact.input_dependent_lhs:
        return sdp_row_weights(problem.compact, problem.form)
    return row_weights(problem.compact.H, problem.form)


def _check_feasible(problem, rule: DecisionRule) -> None:
    """The rule's output satisfies the form's equalities exactly and every row's slack >= t* > 0."""
    xi = _inputs(problem)
    y = rule(xi)
    assert y.shape == (xi.shape[0], problem.n) and y.dtype == torch.float64
    g = problem.family.eq_rhs(xi)
    eq = problem.eq_resid(xi, y).abs().amax(dim=1) / (1 + g.abs().amax(dim=1))
    assert eq.max().item() <= EQ_TOL
    # weighted slacks of the compact rows (the standard form's rows -s <= 0 carry the same slacks)
    slack = -problem.compact.ineq_resid(xi, y[:, : problem.n_orig]) / torch.as_tensor(_weights(problem))
    assert rule.t_star > 0
    assert slack.min().item() >= rule.t_star - MARGIN_TOL
    if problem.form == "standard":
        assert (-problem.ineq_resid(xi, y)).min().item() >= rule.t_star - MARGIN_TOL


# --- the robust LP ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["standard", "inequality"])
def test_lp_rule_is_feasible_for_random_inputs_and_vertices(dcopf14, form):
    problem = dcopf14[form]
    rule = solve_decision_rule(problem)
    _check_feasible(problem, rule)
    assert rule.t_star == pytest.approx(0.182, abs=1e-6)  # the paper's 14-bus margin
    compact = problem.compact
    F = rule.F.numpy()
    assert np.abs(compact.G @ F - compact.B_eq).max() <= 1e-12  # coefficient-wise, so for every x
    assert rule.info["eq_residual"] <= 1e-12 and rule.binding_row >= 0 and "row" in rule.binding_description


@pytest.mark.parametrize("name", ["dcopf_14", "dcopf_30"])
def test_row_generation_reaches_the_full_lp_optimum(name):
    problem = build_problem(name)
    compact, w = problem.compact, row_weights(problem.compact.H, "standard")
    full = solve_robust_lp(compact, w, "clarabel", row_generation=False, regularization=0.0)
    fast = solve_robust_lp(compact, w, "clarabel")
    highs = solve_robust_lp(compact, w, "highs")
    pdlp = solve_robust_lp(compact, w, "pdlp")
    assert fast.t_star == pytest.approx(full.t_star, abs=1e-8)
    assert highs.t_star == pytest.approx(full.t_star, abs=1e-8)
    # first order: optimal to its tolerance, and never above the optimum (t* is verified, not the solver's)
    assert full.t_star - 1e-6 <= pdlp.t_star <= full.t_star + 1e-9
    assert fast.info["rows_in_lp"] < fast.info["expressions"]  # the working set is smaller than the LP


def test_pairs_are_detected_from_data_not_order():
    rng = np.random.default_rng(3)
    H = sp.csr_matrix(rng.normal(size=(5, 4)))
    B = rng.normal(size=(5, 3))
    perm = rng.permutation(10)
    H2 = sp.vstack([H, -H]).tocsr()[perm]
    B2 = np.vstack([B, -B])[perm]
    B2[:, 0] = rng.normal(size=10)  # constant bounds differ: still one expression
    upper, lower = find_expression_pairs(H2, B2[:, 1:])
    assert len(upper) == 5 and np.all(lower >= 0)
    for i, j in zip(upper, lower):
        assert np.allclose(H2[i].toarray(), -H2[j].toarray()) and np.allclose(B2[i, 1:], -B2[j, 1:])
    B2[perm == 0, 1] += 1.0  # input coefficients no longer opposite: that row and its mirror stand alone
    upper, lower = find_expression_pairs(H2, B2[:, 1:])
    assert len(upper) == 6 and np.sum(lower < 0) == 2


def test_lp_on_a_general_box_with_a_fixed_input():
    """Asymmetric box, an input of zero radius and one that moves nothing: the closed-form margin equals the
    minimum over the box's vertices, and G F = B_eq holds coefficient-wise."""
    rng = np.random.default_rng(0)
    n, k = 6, 4
    box = InputBox(np.array([-0.5, 0.2, 1.0, -1.0]), np.array([1.5, 0.2, 3.0, 1.0]))
    G = sp.csr_matrix(rng.normal(size=(2, n)))
    F0 = rng.normal(size=(n, k + 1))
    F0[:, 4] = 0.0
    H = sp.csr_matrix(np.vstack([np.eye(n), -np.eye(n), rng.normal(size=(2, n))]))
    B_eq = G @ F0
    B_ineq = np.asarray(H @ F0)
    B_ineq[:, 0] += 5.0
    B_ineq[:, 4] = 0.0
    family = JointlyLinearFamily(box=box, G=G, B_eq=B_eq, H=H, B_ineq=B_ineq)
    w = row_weights(H, "inequality")
    sol = solve_robust_lp(family, w)
    assert np.abs(G @ sol.F - B_eq).max() <= 1e-12
    vertices = box.vertices().numpy()
    x = np.hstack([np.ones((len(vertices), 1)), vertices])
    slack = (x @ (B_ineq - H @ sol.F).T) / w
    assert np.allclose(slack.min(axis=0), verified_row_margins(sol.F, H, B_ineq, box, w), atol=1e-12)
    assert sol.t_star >= np.min(5.0 / w) - 1e-9  # F0 itself has margin 5 / ||H_i|| on row i


# --- the SDP ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["standard", "inequality"])
def test_sdp_rule_is_feasible_for_random_inputs_and_all_vertices(form):
    problem = Portfolio(uncertainty=0.3, form=form)
    rule = solve_decision_rule(problem)
    _check_feasible(problem, rule)
    assert rule.info["sampled_min_margin"] >= rule.t_star - MARGIN_TOL
    assert rule.info["eq_residual"] <= 1e-12


def test_sdp_paper_margin_is_a_weaker_certificate_of_the_same_quality():
    problem = Portfolio(uncertainty=0.3)
    w = sdp_row_weights(problem.compact, "standard")
    paper = solve_robust_sdp(problem.compact, w, margin="identity")
    ours = solve_robust_sdp(problem.compact, w, margin="e1")
    assert 0 < paper.t_star < ours.t_star
    assert paper.info["sampled_min_margin"] == pytest.approx(ours.info["sampled_min_margin"], rel=1e-4)
    assert ours.t_star == pytest.approx(ours.info["sampled_min_margin"], rel=1e-6)  # e1 is tight here


def test_sdp_with_scs_agrees():
    problem = Portfolio(uncertainty=0.3)
    w = sdp_row_weights(problem.compact, "standard")
    assert solve_robust_sdp(problem.compact, w, "scs").t_star == pytest.approx(
        solve_robust_sdp(problem.compact, w).t_star, abs=1e-3
    )


# --- the module -----------------------------------------------------------------------------------------------
def test_module_dtypes_state_dict_and_device(dcopf14):
    problem = dcopf14["standard"]
    rule = solve_decision_rule(problem)
    xi = _inputs(problem, 200, 16)
    y64 = rule(xi)
    y32 = rule(xi.float())
    assert y32.dtype == torch.float32 and torch.allclose(y32.double(), y64, atol=1e-5)
    again = DecisionRule.from_state_dict(rule.state_dict())
    assert torch.equal(again(xi), y64) and again.t_star == rule.t_star and again.info == rule.info
    assert rule.to(torch.float32)(xi.float()).dtype == torch.float32
    with pytest.raises(ValueError, match="xi must be"):
        rule(xi[:, :3])
    if torch.cuda.is_available():
        cuda = DecisionRule.from_state_dict(rule.state_dict()).to("cuda")
        assert torch.allclose(cuda(xi.cuda()).cpu(), y64, atol=1e-12)


def test_portfolio_module_has_quadratic_slacks():
    rule = solve_decision_rule(Portfolio(uncertainty=0.3))
    assert rule.quadratic is not None and rule.quadratic.shape == (9, 11, 11) and rule.n == 16
    assert solve_decision_rule(Portfolio(uncertainty=0.3, form="inequality")).quadratic is None


# --- cache ----------------------------------------------------------------------------------------------------
def test_cache_round_trips_and_detects_corruption(tmp_path, dcopf14):
    problem = dcopf14["standard"]
    first = solve_decision_rule(problem, cache_dir=tmp_path)
    files = list((tmp_path / "decision_rules").glob("*.rule"))
    assert len(files) == 1 and not first.info["cached"]
    second = solve_decision_rule(problem, cache_dir=tmp_path)
    assert second.info["cached"] and torch.equal(second.linear, first.linear) and second.t_star == first.t_star

    data = files[0].read_bytes()
    for broken in (data[: len(data) // 2], data[:-10] + b"0123456789", b"garbage"):
        files[0].write_bytes(broken)
        with pytest.warns(UserWarning, match="unusable"):
            rebuilt = solve_decision_rule(problem, cache_dir=tmp_path)
        assert not rebuilt.info["cached"] and torch.allclose(rebuilt.linear, first.linear, atol=1e-7)
        assert files[0].read_bytes()[:8] == b"HLRULE1\n"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rebuilt file loads cleanly
        assert solve_decision_rule(problem, cache_dir=tmp_path).info["cached"]
    assert not list((tmp_path / "decision_rules").glob("*.tmp"))


def test_cache_key_separates_forms_and_solvers(tmp_path, dcopf14):
    solve_decision_rule(dcopf14["standard"], cache_dir=tmp_path)
    solve_decision_rule(dcopf14["inequality"], cache_dir=tmp_path)
    solve_decision_rule(dcopf14["standard"], solver="highs", cache_dir=tmp_path)
    solve_decision_rule(dcopf14["standard"], cache_dir=tmp_path, margin_gap=1e-4)  # may be another rule
    assert len(list((tmp_path / "decision_rules").glob("*.rule"))) == 4


def test_lp_and_qp_share_one_rule_and_other_constraints_do_not(tmp_path):
    """A rule depends on the constraints only: the QP variant loads the LP's; another box does not."""
    solve_decision_rule(build_problem("dcopf_14", objective="lp"), cache_dir=tmp_path)
    assert solve_decision_rule(build_problem("dcopf_14", objective="qp"), cache_dir=tmp_path).info["cached"]
    assert not solve_decision_rule(build_problem("dcopf_14", uncertainty=0.3), cache_dir=tmp_path).info["cached"]
    assert len(list((tmp_path / "decision_rules").glob("*.rule"))) == 2


# --- infeasibility --------------------------------------------------------------------------------------------
def test_infeasible_level_raises_with_the_largest_feasible_level():
    with pytest.raises(DecisionRuleInfeasible) as info:
        solve_decision_rule(build_problem("dcopf_30", uncertainty=0.12))
    err = info.value
    assert isinstance(err, ValueError) and err.t_star < 0
    assert err.max_uncertainty is not None and 0.1 < err.max_uncertainty < 0.12
    assert f"{err.max_uncertainty:.4f}" in str(err) and "uncertainty 0.12" in str(err)
    assert "exact, one LP" in str(err)


@pytest.mark.parametrize("key", ["dcopf_14", "dcopf_30", "dcopf_57"])
def test_exact_largest_uncertainty_separates_feasible_from_infeasible_levels(key):
    """The one-LP level r* (Charnes-Cooper form of the robust LP) is where t* changes sign: the ordinary
    margin LP gives t* > 0 just below it and t* < 0 just above, and the bisection agrees to its tolerance."""
    from hardlinear.rules.decision_rule import max_uncertainty_exact, rebuilder, rule_margin

    problem = build_problem(key)
    r_star = max_uncertainty_exact(problem)
    assert r_star is not None and problem.uncertainty < r_star < 1.0  # the paper's level has a rule
    build = rebuilder(problem)
    assert rule_margin(build(r_star * (1 - 1e-3))) > 0
    assert rule_margin(build(r_star * (1 + 1e-3))) < 0
    if key == "dcopf_30":
        assert abs(max_uncertainty(build, lo=0.0, hi=0.5, tol=1e-4) - r_star) < 2e-4


def test_exact_largest_uncertainty_declines_the_sdp():
    from hardlinear.rules.decision_rule import max_uncertainty_exact

    assert max_uncertainty_exact(Portfolio()) is None  # input-dependent left-hand side: bisection only


def test_infeasible_without_bisection_still_says_so():
    with pytest.raises(DecisionRuleInfeasible, match="was not computed"):
        solve_decision_rule(build_problem("dcopf_30", uncertainty=0.12), find_max_uncertainty=False)


def test_inconsistent_equalities_raise_and_say_why():
    from hardlinear.problems.base import Objective, Problem

    G = sp.csr_matrix(np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]]))
    B_eq = np.array([[1.0, 0.5], [2.0, 0.5]])  # the same row asked to equal two things
    H = sp.csr_matrix(np.vstack([np.eye(3), -np.eye(3)]))
    family = JointlyLinearFamily(box=InputBox.symmetric(1), G=G, B_eq=B_eq, H=H, B_ineq=np.tile([[5.0, 0.0]], (6, 1)))
    toy = Problem(family, Objective(c=np.ones(3)), "lp", "standard", "toy")
    # issue 60: the diagnosis names the two equality rows in conflict, and that no input set helps
    with pytest.raises(DecisionRuleInfeasible, match=r"no solution for F.*nor at the centre.*in conflict there: "
                       r"equality row 0; equality row 1\. They contradict each other whatever the input"):
        solve_decision_rule(toy)


def test_paper_portfolio_sits_at_zero_margin():
    """At the paper's level 0.4 the average-quality row of bonds with rating 1 has zero slack at xi = 1 for
    every rule: t* = 0. It raises by default and is accepted, with a warning, on request."""
    with pytest.raises(DecisionRuleInfeasible, match="about 0.39"):
        solve_decision_rule(Portfolio())
    with pytest.warns(UserWarning, match="no strict margin"):
        rule = solve_decision_rule(Portfolio(), require_positive_margin=False)
    assert abs(rule.t_star) < 1e-6


def test_max_uncertainty_bisection():
    level = max_uncertainty(lambda r: Portfolio(uncertainty=r), lo=0.2, hi=0.6, tol=1e-3)
    assert 0.399 - 1e-3 <= level <= 0.4
    assert max_uncertainty(lambda r: Portfolio(uncertainty=r), lo=0.1, hi=0.3) == 0.3
    with pytest.raises(ValueError, match="lo < hi"):
        max_uncertainty(lambda r: Portfolio(uncertainty=r), lo=0.5, hi=0.5)


def test_bad_solver_names_the_choices():
    with pytest.raises(ValueError, match="highs"):
        solve_decision_rule(build_problem("dcopf_14"), solver="mosek")
    with pytest.raises(ValueError, match="scs"):
        solve_decision_rule(Portfolio(uncertainty=0.3), solver="highs")


# --- the paper's own rules as a floor ---------------------------------------------------------------------------
@pytest.mark.skipif(not PAPER_DATA.exists(), reason=missing_reason(PAPER_DATA))
@pytest.mark.parametrize("name", ["dcopf_14", "dcopf_30", "dcopf_57"])
def test_our_margin_is_at_least_the_paper_rules(name):
    data = np.load(PAPER_DATA / f"{name}.npz")
    slack = data["nonnegative_mask"] == 1
    theirs = float(np.min(data["ldr_bias"][slack] - np.abs(data["ldr_weight"][slack]).sum(axis=1)))
    ours = solve_decision_rule(build_problem(name, form="standard")).t_star
    assert ours >= theirs - 1e-8 * max(1.0, abs(theirs))


@pytest.mark.skipif(not PAPER_DATA.exists(), reason=missing_reason(PAPER_DATA))
def test_portfolio_margin_is_at_least_the_paper_rules():
    data = np.load(PAPER_DATA / "portfolio.npz")
    k = data["samples"].shape[1]
    A = data["A_scale"].reshape(k + 1, *data["A"].shape)
    n_rule = data["ldr_bias"].shape[0]
    box = InputBox.symmetric(k)
    xi = torch.cat([box.vertices(), box.sample(20000, torch.Generator().manual_seed(0))]).numpy()
    x = np.hstack([np.ones((len(xi), 1)), xi])
    y = data["ldr_bias"] + xi @ data["ldr_weight"].T
    rows = np.einsum("bj,jmn->bmn", x, A[:, :, :n_rule])
    slack_rows = np.flatnonzero(np.abs(A[0, :, n_rule:]).sum(axis=1) > 0)
    theirs = float((data["b"][None, slack_rows] - np.einsum("bmn,bn->bm", rows[:, slack_rows], y)).min())
    with pytest.warns(UserWarning, match="no strict margin"):
        rule = solve_decision_rule(Portfolio(), require_positive_margin=False)
    assert rule.t_star >= theirs - 1e-6


# --- stopping the row generation at a certified gap ----------------------------------------------------------
def _paired_family(seed: int = 2, n: int = 4, k: int = 3, m: int = 25) -> JointlyLinearFamily:
    """Random two-sided rows ``|H1 y - b(x)| <= r``: small enough to solve in milliseconds, and (seed 2,
    searched for) a working set whose second round's rule is feasible with a margin below the bound."""
    rng = np.random.default_rng(seed)
    G = sp.csr_matrix(rng.normal(size=(1, n)))
    F0 = rng.normal(size=(n, k + 1)) * 0.3
    H1 = rng.normal(size=(m, n))
    B_ineq = np.vstack([H1 @ F0, -(H1 @ F0)])
    B_ineq[:, 0] += 1.0 + rng.random(2 * m)
    return JointlyLinearFamily(
        box=InputBox(-np.ones(k), np.ones(k)), G=G, B_eq=G @ F0, H=sp.csr_matrix(np.vstack([H1, -H1])), B_ineq=B_ineq
    )


def test_margin_gap_stops_early_with_a_certified_bound(monkeypatch):
    """Stopped at the gap, the rule is feasible with its verified t*, the working-set optimum bounds the full
    LP's t* from above, and the two are within the gap; with gap 0 the rounds run to the last row."""
    import hardlinear.rules.robust_lp as robust_lp

    family = _paired_family()
    w = row_weights(family.H, "inequality")
    monkeypatch.setattr(robust_lp, "_seed", lambda red: np.arange(4))  # a small start, so several rounds
    exact = solve_robust_lp(family, w)
    gapped = solve_robust_lp(family, w, margin_gap=0.3)
    assert gapped.info["rounds"] < exact.info["rounds"] and "stopped_at_gap" not in exact.info
    assert exact.t_star <= gapped.info["t_working_set"] + 1e-7  # the bound holds for the full LP's optimum
    assert (1 - 0.3) * gapped.info["t_working_set"] - 1e-9 <= gapped.t_star <= exact.t_star + 1e-9
    assert gapped.t_star == pytest.approx(verified_row_margins(gapped.F, family.H, family.B_ineq, family.box, w).min())
    assert solve_robust_lp(family, w, margin_gap=0.0).t_star == pytest.approx(exact.t_star, abs=1e-9)
    with pytest.raises(ValueError, match="margin_gap"):
        solve_robust_lp(family, w, margin_gap=1.0)


def test_level_gap_returns_a_certified_lower_bound():
    """dcopf_118's level LP takes two rounds; its first round's rule is feasible at some smaller scale (0.12 or
    0.53 of the bound 1.15-1.24, depending on the BLAS's rounding of the seed), so a loose gap stops there with
    that scale: below the exact level, within the gap of the bound, and a rule exists just below it."""
    from hardlinear.rules.decision_rule import max_uncertainty_exact, rebuilder, rule_margin
    from hardlinear.rules.robust_lp import max_uncertainty_scaling

    gap = 0.999
    problem = build_problem("dcopf_118")
    exact = max_uncertainty_exact(problem) / problem.uncertainty
    kappa, info = max_uncertainty_scaling(problem.compact, margin_gap=gap)
    assert info["rounds"] == 1 and "stopped_at_gap" in info
    assert (1 - gap) * info["kappa_upper"] <= kappa < exact <= info["kappa_upper"] * (1 + 1e-6)
    level = max_uncertainty_exact(problem, margin_gap=gap)
    assert level == pytest.approx(kappa * problem.uncertainty)
    assert rule_margin(rebuilder(problem)(level * (1 - 1e-3))) > 0
