"""The cost-aware decision rule (rule_objective="cost"): a guaranteed share of the margin, a lower expected
objective, verified independently; its closed-form expectation; its cache key; its config option."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from hardlinear.constraints.family import InputBox
from hardlinear.methods.ldr import LDR
from hardlinear.methods.proposed import Proposed
from hardlinear.problems import Portfolio, build_problem
from hardlinear.rules.cost import RuleCost, expected_cost
from hardlinear.rules.decision_rule import solve_decision_rule
from hardlinear.rules.robust_lp import row_weights, verified_row_margins


def test_expected_cost_closed_form_matches_monte_carlo():
    rng = np.random.default_rng(0)
    n, k = 6, 4
    box = InputBox(rng.uniform(-2, 0, k), rng.uniform(0.5, 3, k))
    F = rng.standard_normal((n, k + 1))
    A = rng.standard_normal((n, n))
    cost = RuleCost(rng.standard_normal(n), sp.csr_matrix(A @ A.T))
    xi = box.sample(400_000, torch.Generator().manual_seed(1)).numpy()
    y = np.hstack([np.ones((len(xi), 1)), xi]) @ F.T
    sampled = y @ cost.c + 0.5 * np.einsum("bi,ij,bj->b", y, cost.Q.toarray(), y)
    assert expected_cost(F, cost, box) == pytest.approx(sampled.mean(), rel=3 * sampled.std() / np.sqrt(len(xi)) / abs(sampled.mean()) + 1e-12)


@pytest.mark.parametrize("objective", ["lp", pytest.param("qp", marks=pytest.mark.slow)])  # qp: 10 s to build
def test_cost_rule_keeps_its_margin_and_lowers_the_expected_cost(objective):
    p = build_problem("dcopf_14", objective=objective)
    margin_rule = solve_decision_rule(p)
    rule = solve_decision_rule(p, rule_objective="cost", margin_fraction=0.5)
    info = rule.info
    assert info["t_margin_only"] == pytest.approx(margin_rule.t_star, rel=1e-6)
    # independent check: every row's worst slack over the box, in float64, from the rule's F alone
    margins = verified_row_margins(
        rule.F.numpy(), p.compact.H, p.compact.B_ineq, p.box, row_weights(p.compact.H, p.form)
    )
    assert margins.min() == pytest.approx(rule.t_star, rel=1e-9)
    assert rule.t_star >= 0.5 * margin_rule.t_star * (1 - 1e-6)
    # measured: 2365 against 2678 (LP), 4944 against 5173 (QP)
    assert info["expected_cost"] < 0.97 * info["expected_cost_margin_only"]
    # the closed form is what the rule costs on samples, and every sample is feasible
    xi = p.sample(4000, torch.Generator().manual_seed(0))
    y = rule(xi)
    assert p.ineq_resid(xi, y).max() <= 1e-9 and p.eq_resid(xi, y).abs().max() <= 1e-9
    mean = p.objective(xi, y).mean().item()
    assert mean == pytest.approx(info["expected_cost"], rel=0.01)


def test_cost_rule_has_its_own_cache_file(tmp_path):
    p = build_problem("dcopf_14")
    margin = solve_decision_rule(p, cache_dir=tmp_path)
    cost = solve_decision_rule(p, cache_dir=tmp_path, rule_objective="cost")
    half = solve_decision_rule(p, cache_dir=tmp_path, rule_objective="cost", margin_fraction=0.25)
    files = sorted(f.name for f in (tmp_path / "decision_rules").iterdir())
    assert len(files) == 3, files
    again = solve_decision_rule(p, cache_dir=tmp_path, rule_objective="cost")
    assert again.info["cached"] and again.t_star == cost.t_star
    assert margin.t_star > cost.t_star > half.t_star


def test_cost_rule_on_the_sdp():
    p = Portfolio(uncertainty=0.3)
    margin_rule = solve_decision_rule(p)
    rule = solve_decision_rule(p, rule_objective="cost", margin_fraction=0.5)
    assert rule.t_star >= 0.5 * margin_rule.t_star * (1 - 1e-6)  # a certified margin (eigenvalues of the SDP)
    assert rule.info["expected_cost"] <= rule.info["expected_cost_margin_only"] + 1e-9
    xi = p.sample(2000, torch.Generator().manual_seed(0))
    assert p.ineq_resid(xi, rule(xi)).max() <= 1e-9


def test_rule_options_are_checked_at_construction():
    with pytest.raises(ValueError, match="rule_objective must be one of"):
        Proposed(rule_objective="cheapest")
    with pytest.raises(ValueError, match=r"rule_margin_fraction must be in \[0, 1\]"):
        LDR(rule_objective="cost", rule_margin_fraction=1.5)
    assert LDR(rule_objective="cost").describe()["variant"] == "rule=cost0.5"
    assert Proposed().describe()["variant"] == ""
