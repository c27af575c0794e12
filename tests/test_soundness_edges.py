"""The layer at its edges (issue 21): overflowing slacks, float32 outputs of the fused path, float32 rules
whose margin is below the float32 rounding, and cached rules that no longer verify.

Each test failed on the code before its fix (see the commit messages)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hardlinear.layers.feasibility import FeasibilityLayer
from hardlinear.layers.fused import FusedProposed
from hardlinear.methods.base import Context
from hardlinear.methods.ldr import LDR
from hardlinear.methods.proposed import Proposed
from hardlinear.problems import Portfolio, build_problem
from hardlinear.rules.checks import reverify, rounding_shortfall
from hardlinear.rules.decision_rule import (
    DecisionRule,
    _load_cached,
    _save_cached,
    max_uncertainty_exact,
    solve_decision_rule,
)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("cache"))


def test_overflowing_slacks_give_the_safe_output_and_finite_gradients(cache_dir):
    """Finite task outputs ~1e307 whose ``H(x) y`` overflows (the portfolio's input-dependent H, inequality
    form): alpha = 1, the output is the safe one, the row is counted, and the gradient is finite (it was NaN)."""
    problem = Portfolio(uncertainty=0.3, form="inequality")
    rule = solve_decision_rule(problem, cache_dir=cache_dir)
    layer = FeasibilityLayer(problem.family, rule)
    xi = problem.sample(6, generator=torch.Generator().manual_seed(0)).double()
    pattern = torch.tensor([1.0, -1.0] * (problem.n // 2) + [0.0] * (problem.n % 2), dtype=torch.float64)
    y_task = 2.5e307 * pattern.repeat(6, 1)  # finite, and so is every row sum of its projection
    y_task[:3] = rule(xi[:3])  # ordinary rows beside the huge ones
    y_task.requires_grad_(True)
    y_tn = layer.project(xi, y_task).detach()
    assert torch.isfinite(y_tn).all() and torch.isfinite(y_tn.sum(dim=1)).all()
    y = layer(xi, y_task)
    stats = layer.last_stats
    assert torch.isfinite(y).all()
    assert torch.equal(stats["alpha"][3:], torch.ones(3, dtype=torch.float64))
    assert torch.equal(stats["nonfinite"], torch.tensor([False] * 3 + [True] * 3))
    assert torch.equal(y[3:].detach(), rule(xi)[3:])  # lerp at alpha = 1 is the safe output, bit for bit
    assert float(problem.ineq_resid(xi, y.detach()).clamp(min=0.0).max()) <= 1e-12
    y.square().sum().backward()
    assert torch.isfinite(y_task.grad).all()
    assert torch.equal(y_task.grad[3:], torch.zeros(3, problem.n, dtype=torch.float64))


# --- the fused path with a float32 output -------------------------------------------------------------------
def _method(problem, cache_dir: str, layer_dtype: str = "float64", dtype=torch.float64) -> Proposed:
    method = Proposed(out_of_domain="count", fused_inference=True, layer_dtype=layer_dtype)
    torch.manual_seed(0)
    method.setup(problem, Context(cache_dir=cache_dir, dtype=dtype, seed=0, progress=False))
    return method.eval()


def test_fused_float32_output_of_a_row_left_alone_is_feasible(cache_dir):
    """Task outputs on the boundary (the guard-less layer's blend towards points far along null-space
    directions): the fused path with a float32 output returned their float64 projection unguarded (alpha = 0)
    and its float32 rounding violated inequalities (5 of 16 here, up to 1.7e-8); now none is violated."""
    problem = build_problem("dcopf_30", form="inequality")
    method = _method(problem, cache_dir)
    last = method.net.net[-1]
    x = problem.sample(1, generator=torch.Generator().manual_seed(3)).double().float().double()
    N = method.layer.projector.consts.basis
    on_boundary = FeasibilityLayer(problem.family, method.rule, rounding_guard=0.0)
    worst = -1.0
    for j in range(0, problem.n, max(1, problem.n // 8)):
        for sign in (1.0, -1.0):
            with torch.no_grad():
                target = on_boundary(x, method.rule(x) + sign * 100.0 * (N @ N[j])[None])
                last.weight.zero_()
                last.bias.copy_(target[0])
            y = FusedProposed(problem.family, method.net, method.layer, out_dtype=torch.float32)(x)
            assert y.dtype == torch.float32
            worst = max(worst, float(problem.ineq_resid(x, y.double()).max()))
    assert worst <= 0.0, f"float32 output violates an inequality by {worst:.2e}"


def test_float32_layer_fuses_and_agrees_with_the_layer(cache_dir):
    """``layer_dtype="float32"`` with fused inference fuses (it fell back: the rule cast to float32 failed the
    1e-9 equality check); outputs agree with the unfused float32 layer to float32 rounding, and hold in float64."""
    for form in ("standard", "inequality"):
        problem = build_problem("dcopf_14", form=form)
        method = _method(problem, cache_dir, layer_dtype="float32")
        fused = method.fused_module()
        assert isinstance(fused, FusedProposed), getattr(fused, "reason", "")
        xi = problem.sample(64, generator=torch.Generator().manual_seed(5)).double()
        got = method.predict(xi)
        method.fused_inference = False
        want = method.predict(xi)
        method.fused_inference = True
        assert got.y.dtype == want.y.dtype == torch.float32
        scale = 1.0 + want.y.double().abs().amax(dim=1, keepdim=True)
        assert float(((got.y.double() - want.y.double()).abs() / scale).max()) <= 1e-5
        x32 = xi.float().double()  # the input the float32 layer saw
        ineq = problem.ineq_resid(x32, got.y.double()).clamp(min=0.0) / scale
        assert float(ineq.max()) <= 1e-13, form


# --- a rule whose margin is below the float32 rounding ------------------------------------------------------
def test_rule_margin_below_float32_rounding_keeps_the_method_in_float64(cache_dir):
    """case89_pegase just below its largest uncertainty level: t* ~ 4e-8. Rounded to float32, the rule's own
    output violates ``H y <= h`` at a box vertex; Proposed and LDR with layer_dtype=float32 warn and run in
    float64 (they accepted float32 silently). At a level with room, float32 is kept."""
    base = build_problem("dcopf", case="pglib_opf_case89_pegase", form="inequality", uncertainty=0.003)
    level = max_uncertainty_exact(base) * (1.0 - 1e-6)
    problem = build_problem("dcopf", case="pglib_opf_case89_pegase", form="inequality", uncertainty=level)
    rule = solve_decision_rule(problem, cache_dir=cache_dir)
    assert 0.0 < rule.t_star < 1e-6
    ratio, row = rounding_shortfall(problem, rule, torch.float32)
    assert ratio > 1.0
    # the danger is real: at the binding row's worst vertex, the float32 copy of the rule that the float32 layer
    # used to evaluate misses that row by ~7e-7
    compact = problem.compact
    Z = np.asarray(compact.B_ineq - compact.H @ rule.F.numpy())
    x32 = torch.as_tensor(np.where(Z[row, 1:] > 0, compact.box.lo, compact.box.hi))[None].float()
    y_old = torch.cat([torch.ones(1, 1), x32], dim=1) @ rule.linear.float().T
    assert float(problem.ineq_resid(x32.double(), y_old.double()).max()) > 1e-7
    xi = x32.double()
    for method in (Proposed(layer_dtype="float32"), LDR(layer_dtype="float32")):
        with pytest.warns(UserWarning, match="below the float32 rounding"):
            method.setup(problem, Context(cache_dir=cache_dir, dtype=torch.float32, progress=False))
        assert method.layer_dtype == torch.float64
        y = method.eval().predict(xi).y
        assert y.dtype == torch.float64 and float(problem.ineq_resid(xi, y).max()) <= 1e-12
    roomy = build_problem("dcopf", case="pglib_opf_case89_pegase", form="inequality", uncertainty=0.002)
    method = LDR(layer_dtype="float32")
    method.setup(roomy, Context(cache_dir=cache_dir, dtype=torch.float32, progress=False))
    assert method.layer_dtype == torch.float32


# --- a cached rule is re-verified ---------------------------------------------------------------------------
def test_a_cached_rule_that_no_longer_verifies_is_rebuilt(cache_dir, tmp_path):
    """A cache file with an intact checksum but an edited rule (a coefficient moved, the checksum recomputed)
    was loaded as is; now its margin is recomputed, found to differ from its stored t*, and the rule rebuilt."""
    problem = build_problem("dcopf_14", form="inequality")
    rule = solve_decision_rule(problem, cache_dir=str(tmp_path))
    original = rule.linear.clone()
    (path,) = (tmp_path / "decision_rules").glob("*.rule")
    edited = DecisionRule.from_state_dict({k: v.clone() if torch.is_tensor(v) else v for k, v in rule.state_dict().items()})
    with torch.no_grad():
        edited.linear[0, 0] += 0.5
    _save_cached(path, edited)
    assert _load_cached(path, problem.constraints_fingerprint()) is not None  # the checksum alone passes
    with pytest.warns(UserWarning, match="does not verify"):
        again = solve_decision_rule(problem, cache_dir=str(tmp_path))
    assert torch.equal(again.linear, original) and again.t_star == rule.t_star
    assert reverify(problem, again) is None
