"""An input polytope {xi : A_in xi <= b_in} and an input-dependent cost c(x) = c0 + C xi (issue 18, items 1 and 3)."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import torch

import hardlinear
from hardlinear.rules.cost import RuleCost, expected_cost
from hardlinear.rules.decision_rule import DecisionRuleInfeasible, solve_decision_rule
from hardlinear.rules.robust_lp import row_weights, solve_robust_lp, verified_row_margins

K = 3
OCTAHEDRON_A = np.array(list(itertools.product([-1.0, 1.0], repeat=K)))  # |xi_1| + |xi_2| + |xi_3| <= 1
OCTAHEDRON_V = np.vstack([np.eye(K), -np.eye(K)])  # its six vertices


def _rows(seed: int = 0, scale: float = 0.5, n: int = 6):
    """A box on y, four random rows, right-hand sides that move with the input; two equalities."""
    rng = np.random.default_rng(seed)
    H = np.vstack([np.eye(n), -np.eye(n), rng.standard_normal((4, n))])
    h = (np.concatenate([np.ones(2 * n), rng.uniform(1, 2, 4)]), scale * rng.standard_normal((2 * n + 4, K)))
    G = rng.standard_normal((2, n))
    g = (0.1 * rng.standard_normal(2), 0.1 * rng.standard_normal((2, K)))
    return {"G": G, "g": g, "H": H, "h": h}


def test_rule_over_a_polytope_holds_at_every_vertex_where_the_box_has_none():
    rows = _rows()
    octahedron = hardlinear.LinearConstraints(A_in=OCTAHEDRON_A, b_in=np.ones(8), **rows)
    np.testing.assert_allclose(octahedron.box.lo, -1.0, atol=1e-8)  # its bounding box, from 2k LPs
    weights = row_weights(octahedron.compact.H, "inequality")
    sol = solve_robust_lp(octahedron.compact, weights)
    assert sol.t_star > 0.3
    # the worst case of an affine slack over a polytope is at a vertex: enumerate them
    X = np.hstack([np.ones((6, 1)), OCTAHEDRON_V])
    slack = (octahedron.compact.B_ineq - rows["H"] @ sol.F) @ X.T / weights[:, None]
    assert slack.min() >= sol.t_star - 1e-12
    assert slack.min() == pytest.approx(sol.t_star, rel=1e-9)  # the certified LP bound is tight
    np.testing.assert_allclose(rows["G"] @ sol.F, octahedron.compact.B_eq, atol=1e-12)
    # over the bounding box the same rule breaks (and no rule exists there): the polytope is what made it possible
    box = hardlinear.LinearConstraints(-np.ones(K), np.ones(K), **rows)
    assert verified_row_margins(sol.F, box.compact.H, box.compact.B_ineq, box.box, weights).min() < 0
    with pytest.raises(DecisionRuleInfeasible, match="input box shrunk about its centre"):
        solve_decision_rule(box)
    # a polytope with no rule (the octahedron blown up 4x) names the binding row and what to change
    wide = hardlinear.LinearConstraints(A_in=OCTAHEDRON_A, b_in=4 * np.ones(8), **rows)
    with pytest.raises(DecisionRuleInfeasible, match=r"binding row \d+.*input set is a polytope: tighten it"):
        solve_decision_rule(wide)


def _paired_rows(seed: int = 7, n: int = 6) -> dict:
    """Two-sided rows (``-A y <= ...`` beside ``A y <= ...``, opposite input parts): pairs in the robust LP."""
    rng = np.random.default_rng(seed)
    A, Ax = rng.standard_normal((5, n)), 0.3 * rng.standard_normal((5, K))
    return {"H": np.vstack([A, -A]), "h": (np.r_[np.full(5, 1.5), np.ones(5)], np.vstack([Ax, -Ax])),
            "G": rng.standard_normal((2, n)), "g": (np.zeros(2), 0.1 * rng.standard_normal((2, K)))}


@pytest.mark.parametrize("paired", [False, True])
def test_polytope_that_equals_a_box_gives_the_box_t_star(paired, tmp_path):
    rows = _paired_rows() if paired else _rows(seed=1, scale=0.2)
    lo, hi = np.array([-1.0, 0.0, 0.5]), np.array([1.0, 2.0, 0.75])
    as_box = hardlinear.LinearConstraints(lo, hi, **rows)
    as_poly = hardlinear.LinearConstraints(A_in=np.vstack([np.eye(K), -np.eye(K)]), b_in=np.r_[hi, -lo], **rows)
    weights = row_weights(as_box.compact.H, "inequality")
    for cost in (None, RuleCost(np.ones(6), np.eye(6))):
        a = solve_robust_lp(as_box.compact, weights, cost=cost)
        b = solve_robust_lp(as_poly.compact, weights, cost=cost)
        assert b.t_star == pytest.approx(a.t_star, rel=1e-7)
        if cost is not None:
            assert b.info["expected_cost"] == pytest.approx(a.info["expected_cost"], rel=1e-7)
    assert as_box.constraints_fingerprint() != as_poly.constraints_fingerprint()  # separate cache entries
    # the cached rule is re-verified over the polytope on load, and loads without a rebuild
    first = solve_decision_rule(as_poly, cache_dir=tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = solve_decision_rule(as_poly, cache_dir=tmp_path)
    assert again.info["cached"] and again.t_star == first.t_star


@pytest.mark.parametrize(
    ("A_in", "b_in", "message"),
    [
        (np.array([[1.0, 0, 0], [-1.0, 0, 0]]), np.array([-1.0, 0.0]), "is empty"),
        (np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]]), np.ones(3), "unbounded along input 0"),
        (np.vstack([OCTAHEDRON_A, [[1.0, 0, 0], [-1.0, 0, 0]]]), np.r_[np.ones(8), 0.0, 0.0], "empty interior"),
        (np.ones((2, 2)), np.ones(2), "A_in has 2 columns but lo/hi have 3"),
        (OCTAHEDRON_A, np.ones(7), "b_in has 7 entries but A_in has 8 rows"),
        (np.vstack([OCTAHEDRON_A, np.zeros(3)]), np.ones(9), "rows \\[8\\] of A_in are zero"),
        (OCTAHEDRON_A, np.r_[np.ones(7), np.nan], "b_in has a NaN"),
    ],
)
def test_bad_polytope_is_refused_with_the_fix(A_in, b_in, message):
    lohi = {"lo": -np.ones(K), "hi": np.ones(K)} if "lo/hi" in message else {}
    with pytest.raises(ValueError, match=message):
        hardlinear.LinearConstraints(**lohi, A_in=A_in, b_in=b_in, **_rows())


def test_polytope_needs_constant_matrices_and_both_sides():
    rows = _rows()
    with pytest.raises(ValueError, match="needs constant G and H"):
        hardlinear.LinearConstraints(A_in=OCTAHEDRON_A, b_in=np.ones(8), H=lambda th: rows["H"], h=rows["h"])
    with pytest.raises(ValueError, match="give both A_in and b_in"):
        hardlinear.LinearConstraints(A_in=OCTAHEDRON_A, **rows)
    with pytest.raises(ValueError, match="give the input set"):
        hardlinear.LinearConstraints(**rows)
    with pytest.raises(ValueError, match="rule_solver='reduced' works over an input box"):
        solve_decision_rule(hardlinear.LinearConstraints(A_in=OCTAHEDRON_A, b_in=np.ones(8), **rows), solver="reduced")


def test_layer_is_feasible_inside_the_polytope_and_flags_inputs_outside():
    rows = _rows()
    layer = hardlinear.feasibility_layer(hardlinear.LinearConstraints(A_in=OCTAHEDRON_A, b_in=np.ones(8), **rows))
    poly = layer.polytope
    xi = torch.as_tensor(poly.sample(500, -np.ones(K), np.ones(K), seed=3))
    y = layer(xi, 10.0 * torch.randn(500, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0)))
    x = torch.cat([torch.ones(500, 1, dtype=torch.float64), xi], dim=1)
    resid = y @ torch.as_tensor(rows["H"]).T - x @ torch.as_tensor(np.c_[rows["h"][0], rows["h"][1]]).T
    assert resid.max() <= 1e-9
    assert not layer.domain_flags(xi).any()
    corner = torch.tensor([[0.9, 0.9, 0.0], [0.2, 0.2, 0.2]], dtype=torch.float64)  # in the box, outside / inside
    assert layer.domain_flags(corner).tolist() == [True, False]
    with pytest.raises(ValueError, match="1 of 2 inputs lie outside the input polytope"):
        layer.out_of_domain = "error"
        layer(corner, torch.zeros(2, 6, dtype=torch.float64))


def test_cost_rule_over_a_polytope_uses_its_uniform_moments():
    rows = _rows()
    rng = np.random.default_rng(5)
    c, Q = rng.standard_normal(6), np.eye(6)
    constraints = hardlinear.LinearConstraints(A_in=OCTAHEDRON_A, b_in=np.ones(8), c=c, Q=Q, **rows)
    layer = hardlinear.feasibility_layer(constraints)
    info = layer.safe.info
    assert info["expected_cost"] < info["expected_cost_margin_only"]
    # the closed form with the stored moments against a fresh Monte-Carlo sample of the octahedron
    xi = constraints.compact.polytope.sample(40000, -np.ones(K), np.ones(K), seed=11)
    y = np.hstack([np.ones((len(xi), 1)), xi]) @ layer.safe.F.numpy().T
    sampled = y @ c + 0.5 * np.einsum("bi,ij,bj->b", y, Q, y)
    assert info["expected_cost"] == pytest.approx(sampled.mean(), abs=4 * sampled.std() / np.sqrt(len(xi)))
    # the user's own inputs replace the uniform expectation; inputs outside the polytope are refused
    own = hardlinear.LinearConstraints(A_in=OCTAHEDRON_A, b_in=np.ones(8), c=c, Q=Q, inputs=xi[:100], **rows)
    assert own.fingerprint() != constraints.fingerprint()
    with pytest.raises(ValueError, match="1 of 2 inputs lie outside the input set"):
        hardlinear.LinearConstraints(A_in=OCTAHEDRON_A, b_in=np.ones(8), c=c, inputs=[[0.1, 0, 0], [0.9, 0.9, 0]], **rows)


# --- an input-dependent cost c(x) = c0 + C xi ------------------------------------------------------------
def test_input_dependent_cost_closed_form_matches_monte_carlo():
    rng = np.random.default_rng(2)
    n = 5
    box = hardlinear.LinearConstraints(np.array([-1.0, 0.0, 2.0]), np.array([1.0, 3.0, 2.5]), H=np.eye(n), h=np.ones(n)).box
    F = rng.standard_normal((n, K + 1))
    A = rng.standard_normal((n, n))
    cost = RuleCost(rng.standard_normal(n), A @ A.T, C=rng.standard_normal((n, K)))
    xi = box.lo + rng.random((200000, K)) * (box.hi - box.lo)
    x = np.hstack([np.ones((len(xi), 1)), xi])
    y = x @ F.T
    sampled = np.sum((cost.c + xi @ cost.C.T) * y, axis=1) + 0.5 * np.einsum("bi,ij,bj->b", y, cost.Q.toarray(), y)
    closed = expected_cost(F, cost, box)
    assert closed == pytest.approx(sampled.mean(), abs=3 * sampled.std() / np.sqrt(len(xi)))
    # dropping C moves the expectation by far more than the Monte-Carlo error: the test sees the C term
    assert abs(expected_cost(F, RuleCost(cost.c, cost.Q), box) - closed) > 30 * sampled.std() / np.sqrt(len(xi))


def test_input_dependent_cost_in_the_rule_tuple_and_callable_agree():
    rows = _rows(seed=1, scale=0.2)
    rng = np.random.default_rng(4)
    c0, C = rng.standard_normal(6), 3.0 * rng.standard_normal((6, K))
    lo, hi = -np.ones(K), np.ones(K)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        as_tuple = hardlinear.feasibility_layer(hardlinear.LinearConstraints(lo, hi, c=(c0, C), **rows))
        as_callable = hardlinear.feasibility_layer(hardlinear.LinearConstraints(lo, hi, c=lambda th: c0 + C @ th, **rows))
        constant = hardlinear.feasibility_layer(hardlinear.LinearConstraints(lo, hi, c=c0, **rows))
    np.testing.assert_allclose(as_tuple.safe.F.numpy(), as_callable.safe.F.numpy(), atol=1e-7)
    info = as_tuple.safe.info
    assert info["expected_cost"] < info["expected_cost_margin_only"]
    assert as_tuple.safe.t_star >= 0.5 * info["t_margin_only"] * (1 - 1e-7)
    # the C term changes the rule (its input columns pay against c(x)): it is not the constant cost's rule
    cost = RuleCost(c0, C=C)
    box = hardlinear.LinearConstraints(lo, hi, **rows).box
    assert expected_cost(as_tuple.safe.F.numpy(), cost, box) < expected_cost(constant.safe.F.numpy(), cost, box) - 1e-3
    with pytest.raises(ValueError, match=r"c's input matrix C has shape \(6, 2\); it must be \(n, k\) = \(6, 3\)"):
        hardlinear.LinearConstraints(lo, hi, c=(c0, C[:, :2]), **rows)


def test_readme_polytope_example_runs():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    match = re.search(r"<!-- polytope-example -->\s*(?:<!--.*?-->\s*)?```python\n(.*?)```", text, re.S)
    assert match, "README's library section lost its polytope example"
    rng = np.random.default_rng(0)
    k, n, m = 3, 5, 12
    H = rng.standard_normal((m, n))
    y0 = rng.standard_normal(n)
    # the block continues the user-constraints block: it is given that block's names here (rng, n, k, H, h0, Hx)
    scope = {"np": np, "torch": torch, "hardlinear": hardlinear, "rng": rng, "n": n, "k": k, "H": H,
             "h0": H @ y0 + 1.0, "Hx": 0.3 * rng.standard_normal((m, k))}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 12 random rows in R^5 may leave the margin unbounded: warned and capped
        exec(match.group(1), scope)  # the README's own lines, unchanged
    theta, y = scope["theta"], scope["y"]
    assert theta.min() >= 0 and theta.sum(dim=1).max() <= 1 + 1e-12
    resid = y @ torch.as_tensor(H).T - (torch.as_tensor(scope["h0"]) + theta @ torch.as_tensor(scope["Hx"]).T)
    assert resid.max() <= 1e-9
    assert scope["layer"].safe.info["expected_cost"] <= scope["layer"].safe.info["expected_cost_margin_only"]


def test_a_wide_polytope_is_not_taken_for_a_flat_one():
    """The Chebyshev radius is unbounded above (it was capped at 1, which called a polytope 2e10 wide flat)."""
    wide = hardlinear.LinearConstraints(A_in=OCTAHEDRON_A, b_in=1e10 * np.ones(8), H=np.eye(2, 6), h=np.ones(2))
    np.testing.assert_allclose(wide.box.hi, 1e10, rtol=1e-8)


def test_polytope_cut_by_a_box_is_their_intersection():
    rows = _rows()
    octahedron = hardlinear.LinearConstraints(A_in=OCTAHEDRON_A, b_in=np.ones(8), **rows)
    cut = hardlinear.LinearConstraints(-0.5 * np.ones(K), 0.5 * np.ones(K), A_in=OCTAHEDRON_A, b_in=np.ones(8), **rows)
    np.testing.assert_allclose(cut.box.lo, -0.5) and np.testing.assert_allclose(cut.box.hi, 0.5)
    weights = row_weights(cut.compact.H, "inequality")
    t_cut = solve_robust_lp(cut.compact, weights).t_star
    t_oct = solve_robust_lp(octahedron.compact, weights).t_star
    t_box = solve_robust_lp(hardlinear.LinearConstraints(-0.5 * np.ones(K), 0.5 * np.ones(K), **rows).compact, weights).t_star
    assert t_cut >= max(t_oct, t_box) - 1e-9  # a smaller input set leaves at least the margin of each larger one
    assert t_cut > t_box + 1e-3  # and the octahedron's rows do cut the box's corners


@pytest.mark.parametrize("seed", range(4))
def test_slab_support_is_the_lp_value_and_an_upper_bound(seed):
    """A slab's closed form (a sorted weighted median of the one dual multiplier) against the block-diagonal LP
    of the general path, on random rows, some coefficients of ``a`` zero, a slab cutting the cube, and rows
    along ``a`` (where the slab binds)."""
    from hardlinear.constraints.polytope import slab_support, support

    rng = np.random.default_rng(seed)
    q, r = 7, 12
    a = rng.standard_normal(q)
    a[[1, 4]] = 0.0
    low, high = -0.3 * np.abs(a).sum(), 0.4 * np.abs(a).sum()
    Z = np.vstack([rng.standard_normal((r - 2, q)), a, -a])
    A = np.vstack([a, -a, np.eye(q), -np.eye(q)])
    b = np.r_[high, -low, np.ones(2 * q)]
    upper, gap = support(Z, A, b, np.ones(q))
    closed = slab_support(Z, a, low, high)
    np.testing.assert_allclose(closed, upper - gap, rtol=1e-9, atol=1e-9)  # the LP's own primal value
    np.testing.assert_allclose(closed[-2:], [high, -low], rtol=1e-12)
    # an upper bound on every point of the set: random points of the cube kept inside the slab
    u = rng.uniform(-1, 1, (20000, q))
    u = u[(u @ a >= low) & (u @ a <= high)]
    assert len(u) > 1000 and np.all(u @ Z.T <= closed + 1e-12)


def test_verified_margins_over_a_slab_agree_with_the_general_lp():
    """``verified_row_margins`` over a slab polytope (the closed form, in chunks) equals the general path's LP
    bound (a polytope of the same set with a third, redundant row), and is above the box's worst case."""
    from hardlinear.constraints.family import InputBox
    from hardlinear.constraints.polytope import InputPolytope
    from hardlinear.rules import robust_lp

    rng = np.random.default_rng(3)
    k, n, m = 5, 4, 9
    box = InputBox(lo=-rng.uniform(0.5, 2, k), hi=rng.uniform(0.5, 2, k))
    a = rng.standard_normal(k)
    slab = InputPolytope(np.vstack([a, -a]), np.array([0.2, 0.3]))
    redundant = InputPolytope(np.vstack([a, -a, a]), np.array([0.2, 0.3, 5.0]))
    F, H, B = rng.standard_normal((n, k + 1)), rng.standard_normal((m, n)), rng.standard_normal((m, k + 1))
    w = np.ones(m)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(robust_lp, "MARGIN_CHUNK_ROWS", 4)  # three chunks
        fast = verified_row_margins(F, H, B, box, w, slab)
    general = verified_row_margins(F, H, B, box, w, redundant)
    np.testing.assert_allclose(fast, general, rtol=1e-9, atol=1e-9)
    assert np.all(fast >= verified_row_margins(F, H, B, box, w) - 1e-12) and np.any(fast > verified_row_margins(F, H, B, box, w) + 1e-6)


def test_empty_slab_is_refused():
    from hardlinear.constraints.polytope import InputPolytope, as_slab

    with pytest.raises(ValueError, match="empty"):
        as_slab(InputPolytope(np.array([[1.0, 2.0], [-1.0, -2.0]]), np.array([-1.0, -1.0])))
