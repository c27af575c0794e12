"""The public entry point from one's own matrices (hardlinear.LinearConstraints, hardlinear.feasibility_layer):
the README's example, the checks on bad input, an empty interior, and an unbounded feasible set."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import hardlinear
from hardlinear.rules.decision_rule import DecisionRuleInfeasible, solve_decision_rule
from hardlinear.rules.robust_lp import ProgramUnbounded, row_weights, solve_robust_lp, verified_row_margins

README = Path(__file__).resolve().parents[1] / "README.md"


def _random_matrices(seed: int = 0, n: int = 10, m_eq: int = 3, m_ineq: int = 25, k: int = 4):
    """A problem with a strictly feasible point y0 at every input: G y0 = g0, H y0 < h0."""
    rng = np.random.default_rng(seed)
    G, H = rng.standard_normal((m_eq, n)), rng.standard_normal((m_ineq, n))
    y0 = rng.standard_normal(n)
    return {
        "G": G, "g0": G @ y0, "Gx": 0.1 * rng.standard_normal((m_eq, k)),
        "H": H, "h0": H @ y0 + 1.0, "Hx": 0.1 * rng.standard_normal((m_ineq, k)),
        "lo": -np.ones(k), "hi": np.ones(k),
    }


def _check_feasible(arrays: dict, theta: torch.Tensor, y: torch.Tensor) -> None:
    t = {key: torch.as_tensor(v) for key, v in arrays.items()}
    eq = y @ t["G"].T - (t["g0"] + theta @ t["Gx"].T)
    ineq = y @ t["H"].T - (t["h0"] + theta @ t["Hx"].T)
    assert eq.abs().max() < 1e-9
    assert ineq.max() <= 1e-9


def _readme_example() -> str:
    text = README.read_text()
    match = re.search(r"<!-- user-constraints-example -->\s*(?:<!--.*?-->\s*)?```python\n(.*?)```", text, re.S)
    assert match, "README's library section lost its user-constraints example"
    return match.group(1)


def test_readme_example_is_feasible_and_cached(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(_readme_example(), scope)  # the README's own lines, unchanged
    theta, y = scope["theta"], scope["y"]
    assert y.shape == (theta.shape[0], scope["G"].shape[1])
    arrays = {key: scope[key] for key in ("G", "g0", "Gx", "H", "h0", "Hx")}
    _check_feasible(arrays, theta, y)
    assert (tmp_path / "cache" / "decision_rules").is_dir()  # solved once, cached


def test_rule_from_constraints_alone_and_a_bare_family():
    arrays = _random_matrices(seed=1)
    c = hardlinear.LinearConstraints(
        arrays["lo"], arrays["hi"], G=arrays["G"], g=(arrays["g0"], arrays["Gx"]), H=arrays["H"], h=(arrays["h0"], arrays["Hx"])
    )
    rule = solve_decision_rule(c)  # no Problem, no objective
    assert rule.t_star > 0
    same = solve_decision_rule(c.compact)  # the failing call: a bare JointlyLinearFamily
    assert same.t_star == pytest.approx(rule.t_star, rel=1e-6)
    theta = c.box.sample(200, torch.Generator().manual_seed(0))
    _check_feasible(arrays, theta, rule(theta))


def test_callable_right_hand_sides_and_left_hand_sides():
    arrays = _random_matrices(seed=2, n=6, m_ineq=10, k=2)
    G, H = arrays["G"], arrays["H"]
    dH = 0.01 * np.random.default_rng(3).standard_normal(H.shape)
    c = hardlinear.LinearConstraints(
        arrays["lo"], arrays["hi"],
        G=G, g=lambda th: arrays["g0"] + arrays["Gx"] @ th,
        H=lambda th: H + th[0] * dH, h=lambda th: arrays["h0"] + arrays["Hx"] @ th,
    )
    assert c.compact.input_dependent_lhs
    np.testing.assert_allclose(c.compact.H_stack[1], dH, atol=1e-12)
    layer = hardlinear.feasibility_layer(c)  # the SDP rule, then the layer with a batched H(theta)
    theta = c.box.sample(64, torch.Generator().manual_seed(0))
    y = layer(theta, 10 * torch.randn(64, c.n, dtype=torch.float64, generator=torch.Generator().manual_seed(1)))
    H_theta = torch.as_tensor(H) + theta[:, :1, None] * torch.as_tensor(dH)
    h_theta = torch.as_tensor(arrays["h0"]) + theta @ torch.as_tensor(arrays["Hx"]).T
    assert (torch.einsum("bmn,bn->bm", H_theta, y) - h_theta).max() <= 1e-9
    with pytest.raises(ValueError, match="not affine"):
        hardlinear.LinearConstraints(arrays["lo"], arrays["hi"], H=H, h=lambda th: arrays["h0"] + th[0] ** 2)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"H": np.ones((25, 9))}, "G has 10 columns but H has 9: both must have n columns"),
        ({"g0": np.ones(4)}, r"g's constant has shape \(4,\) but G has 3 rows"),
        ({"Gx": np.ones((3, 5))}, r"g's input matrix has shape \(3, 5\); it must be \(G rows, k\) = \(3, 4\)"),
        ({"hi": -2 * np.ones(4)}, r"lo > hi at inputs \[0, 1, 2, 3\]: swap them"),
        ({"lo": -np.ones(3)}, "lo has 3 entries but hi has 4"),
        ({"hi": np.array([1.0, np.inf, 1.0, 1.0])}, r"hi is not finite at inputs \[1\]"),
        ({"H": np.full((25, 10), np.nan)}, "H has a NaN or inf entry"),
        ({"G": np.array([["a"] * 10] * 3)}, "G must be a real numeric array"),
        ({"h0": np.ones((25, 2))}, r"h's constant has shape \(25, 2\) but H has 25 rows"),
    ],
)
def test_bad_input_is_named_with_the_fix(change, message):
    a = {**_random_matrices(), **change}
    with pytest.raises(ValueError, match=message):
        hardlinear.LinearConstraints(a["lo"], a["hi"], G=a["G"], g=(a["g0"], a["Gx"]), H=a["H"], h=(a["h0"], a["Hx"]))


def test_missing_side_and_bad_options():
    a = _random_matrices()
    with pytest.raises(ValueError, match="H is given but h is not"):
        hardlinear.LinearConstraints(a["lo"], a["hi"], H=a["H"])
    with pytest.raises(ValueError, match="give at least one of G"):
        hardlinear.LinearConstraints(a["lo"], a["hi"])
    c = hardlinear.LinearConstraints(a["lo"], a["hi"], H=a["H"], h=a["h0"])
    with pytest.raises(ValueError, match="rule_objective='cost' needs an objective"):
        hardlinear.feasibility_layer(c, rule_objective="cost")
    with pytest.raises(ValueError, match="c has 3 entries but the constraints have n = 10"):
        hardlinear.LinearConstraints(a["lo"], a["hi"], H=a["H"], h=a["h0"], c=np.ones(3))


def test_layer_picks_the_cost_aware_rule_when_given_an_objective():
    a = _random_matrices(seed=5)
    common = {"G": a["G"], "g": (a["g0"], a["Gx"]), "H": a["H"], "h": (a["h0"], a["Hx"])}
    plain = hardlinear.feasibility_layer(hardlinear.LinearConstraints(a["lo"], a["hi"], **common))
    priced = hardlinear.feasibility_layer(hardlinear.LinearConstraints(a["lo"], a["hi"], **common, c=np.ones(10), Q=np.eye(10)))
    assert plain.safe.info["rule_objective"] == "margin" and priced.safe.info["rule_objective"] == "cost"
    assert priced.safe.t_star >= 0.5 * plain.safe.t_star * (1 - 1e-6)
    assert priced.safe.info["expected_cost"] < priced.safe.info["expected_cost_margin_only"]


def test_empty_interior_names_the_binding_row_and_the_largest_box():
    # y <= 1 - theta and y >= 0.5 + theta: the interval [0.5 + theta, 1 - theta] is empty for theta > 0.25
    H = np.array([[1.0], [-1.0]])
    c = hardlinear.LinearConstraints([-1.0], [1.0], H=H, h=(np.array([1.0, -0.5]), np.array([[-1.0], [-1.0]])))
    with pytest.raises(DecisionRuleInfeasible) as err:
        hardlinear.feasibility_layer(c)
    text = str(err.value)
    assert "binding row" in text and ("row 0:" in text or "row 1:" in text)
    # an affine rule a + b theta needs (1 - a) - |1 + b| f >= 0 and (a - 0.5) - |b - 1| f >= 0 on |theta| <= f:
    # summed, 0.5 >= 2 f, so a rule exists exactly for the box shrunk by a factor below 0.25
    assert err.value.max_uncertainty == pytest.approx(0.25, rel=1e-6)
    assert "shrunk about its centre by any factor below 0.25" in text


def _unbounded_family(seed: int = 0, n: int = 20, m: int = 30, k: int = 3):
    rng = np.random.default_rng(seed)
    H = rng.standard_normal((m, n))
    h0, Hx = rng.uniform(1.0, 2.0, m), 0.1 * rng.standard_normal((m, k))
    return hardlinear.LinearConstraints(-np.ones(k), np.ones(k), H=H, h=(h0, Hx)), H


def test_unbounded_set_is_warned_capped_and_solvers_agree():
    c, _ = _unbounded_family()
    weights = row_weights(c.compact.H, "inequality")
    sols = {}
    for solver in ("clarabel", "highs"):
        with pytest.warns(UserWarning, match="margin is unbounded"):
            sols[solver] = solve_robust_lp(c.compact, weights, solver)
    a, b = sols["clarabel"], sols["highs"]
    assert a.status == b.status == "capped"
    cap = a.info["margin_cap"]
    assert a.t_star == pytest.approx(cap, rel=1e-6) and b.t_star == pytest.approx(cap, rel=1e-6)
    np.testing.assert_allclose(a.F, b.F, atol=1e-4 * (1 + np.abs(a.F).max()))  # the same (smallest) rule
    assert np.abs(a.F).max() < 100  # not the 1e5 coefficients of an uncapped interior point
    with pytest.raises(ProgramUnbounded, match="margin is unbounded"):
        solve_robust_lp(c.compact, weights, "clarabel", max_margin=None)


def test_unbounded_set_with_a_quadratic_cost_and_a_linear_one():
    c, H = _unbounded_family(seed=1)
    weights = row_weights(c.compact.H, "inequality")
    from hardlinear.rules.cost import RuleCost

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qp = solve_robust_lp(c.compact, weights, "clarabel", cost=RuleCost(np.ones(20), np.eye(20)))
        assert qp.t_star >= 0.5 * qp.info["margin_cap"] * (1 - 1e-6)
        assert qp.info["expected_cost"] < qp.info["expected_cost_margin_only"]
        with pytest.raises(ProgramUnbounded, match="expected objective is unbounded below"):
            solve_robust_lp(c.compact, weights, "highs", cost=RuleCost(np.ones(20)))


def test_bounded_polytope_is_not_capped():
    rng = np.random.default_rng(4)
    n, k = 20, 3
    H = np.vstack([np.eye(n), -np.eye(n), rng.standard_normal((30, n))])  # a box in y and 30 random rows
    h0 = np.concatenate([np.ones(2 * n), rng.uniform(1.0, 2.0, 30)])
    c = hardlinear.LinearConstraints(-np.ones(k), np.ones(k), H=H, h=(h0, 0.05 * rng.standard_normal((70, k))))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no unbounded-margin warning
        sols = {s: solve_robust_lp(c.compact, row_weights(c.compact.H, "inequality"), s) for s in ("clarabel", "highs")}
    assert sols["clarabel"].info["margin_unbounded"] is False
    assert sols["clarabel"].status != "capped"
    assert sols["clarabel"].t_star == pytest.approx(sols["highs"].t_star, rel=1e-5)


def test_package_import_loads_neither_numpy_nor_torch():
    """run.py sizes the native thread pools after ``import hardlinear.runtime.threads``: the package's public names must load
    on first use, not with the package."""
    import subprocess
    import sys

    code = "import sys, hardlinear.runtime.threads; print('numpy' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize("cap", [1e5, 1e7])
def test_large_margin_cap_keeps_the_cost_stage_solvable(cap):
    """A cap of 1e5 made the cost stage's floor 5e4 and its rule coefficients ~1e7: Clarabel reported
    PrimalInfeasible. The stage now fixes t at the floor and solves in units of it."""
    from hardlinear.rules.cost import RuleCost

    c, _ = _unbounded_family(seed=1)
    weights = row_weights(c.compact.H, "inequality")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        priced = solve_robust_lp(c.compact, weights, "clarabel", cost=RuleCost(np.ones(20), np.eye(20)), max_margin=cap)
        smallest = solve_robust_lp(c.compact, weights, "clarabel", max_margin=cap)
    assert priced.status == smallest.status == "capped"
    assert priced.info["t_margin_only"] == cap
    assert priced.t_star == pytest.approx(0.5 * cap, rel=1e-7) and priced.t_star >= 0.5 * cap * (1 - 1e-7)
    assert smallest.t_star == pytest.approx(cap, rel=1e-7)
    assert priced.t_star == pytest.approx(verified_row_margins(priced.F, c.compact.H, c.compact.B_ineq, c.compact.box, weights).min())


# --- issue 60, item 8: names on the library route, and why no rule exists ---------------------------------------
def test_names_are_checked_and_read_by_the_messages():
    H = np.array([[1.0], [-1.0]])
    with pytest.raises(ValueError, match=r"ineq_names must name each of the m_ineq inequality rows: shape \(2,\)"):
        hardlinear.LinearConstraints([-1.0], [1.0], H=H, h=np.ones(2), ineq_names=["only one"])
    with pytest.raises(ValueError, match="variable_names must be a sequence of strings"):
        hardlinear.LinearConstraints([-1.0], [1.0], H=H, h=np.ones(2), variable_names="power")
    named = hardlinear.LinearConstraints([-1.0], [1.0], H=H, h=(np.array([1.0, -0.5]), np.array([[-1.0], [-1.0]])),
                                         variable_names=["power"], ineq_names=["cap", "floor"])
    with pytest.raises(DecisionRuleInfeasible) as err:
        hardlinear.feasibility_layer(named, progress=False)
    assert re.search(r"binding row \d \[row \d \((cap|floor)\): [+-]1 power", str(err.value)), str(err.value)
    assert "y[0]" not in str(err.value)


def test_an_input_without_any_solution_is_named_with_the_rows_in_conflict():
    """y <= 1 (cap) and y >= theta (demand) on theta in [0, 2]: at theta = 2 no y exists, whatever the method."""
    c = hardlinear.LinearConstraints([0.0], [2.0], H=np.array([[1.0], [-1.0]]),
                                     h=(np.array([1.0, 0.0]), np.array([[0.0], [-1.0]])),
                                     variable_names=["power"], ineq_names=["cap", "demand"])
    with pytest.raises(DecisionRuleInfeasible) as err:
        hardlinear.feasibility_layer(c, progress=False)
    text = str(err.value)
    assert "have no solution at the input theta = [2.] (a corner of the box)" in text, text
    assert "row 0 (cap): +1 power <= 1" in text and "row 1 (demand): -1 power <= 0 + (input terms)" in text
    assert "by at least 0.5" in text  # the smallest uniform violation at theta = 2: y = 1.5 misses both by 0.5
    assert "no affine rule" not in text and "was not computed" not in text
    assert "(1) an input polytope" in text and "LinearConstraints(..., A_in=A, b_in=b)" in text


def test_feasible_everywhere_but_no_affine_rule_says_so_and_lists_the_fixes():
    """y within 0.1 of the product theta_1 theta_2 at the corners of [0, 1]^2 (McCormick's envelope widened by 0.1):
    every input has solutions, but an affine y takes at (1, 1) the sum of its values at (1, 0) and (0, 1) minus the
    one at (0, 0), at most 0.3, where 0.9 is needed."""
    eps = 0.1
    H = np.array([[1.0], [1.0], [-1.0], [-1.0]])
    h0 = np.array([eps, eps, eps, 1.0 + eps])
    Hx = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [-1.0, -1.0]])
    c = hardlinear.LinearConstraints([0.0, 0.0], [1.0, 1.0], H=H, h=(h0, Hx), ineq_names=["le1", "le2", "ge0", "ge12"])
    with pytest.raises(DecisionRuleInfeasible) as err:
        hardlinear.feasibility_layer(c, progress=False)
    text = str(err.value)
    assert "have a solution at every point checked" in text and "no affine rule y = F (1, theta)" in text, text
    assert "no solution at the input" not in text
    assert "LinearConstraints(..., A_in=A, b_in=b)" in text
    assert re.search(r"a smaller box: LinearConstraints\(lo=mid - f \* \(hi - lo\) / 2, .*with f < 0\.\d+", text)
    assert "rule_objective='cost') is no fix" in text
