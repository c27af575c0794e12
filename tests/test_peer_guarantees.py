"""The peer methods' guarantees (or their lack), in float64, on random inputs and adversarial network outputs:
random, 1e6-scaled, exactly on the boundary, zero, NaN; the way tests/test_guarantee.py audits the proposed layer.

* HardNet-Aff (layers/hardnet.py): with full row rank of ``M = H N``, the corrected output satisfies
  ``M u* = min(M u, s)`` up to rounding; the bound asserted per instance is
  ``64 eps cond(M) (||M||_inf ||u||_inf + ||s||_inf)``. With more rows than free dimensions the same formula
  leaves violations (shown), which is why the layer refuses such families.
* Gauge map (layers/gauge.py): every output satisfies the inequalities with slack ``>= margin s0 - rounding``
  (asserted: violation <= 1e-9 relative), the equalities to 1e-9 relative, and the map is a bijection of the
  unit inf-ball onto the polytope (round trip and preimage of solver optima).
* Pinet (layers/douglas_rachford.py): equalities to rounding after any number of DR iterations (asserted 1e-12
  relative), inequalities only to the distance DR has left, which the metrics record as measured (asserted equal
  to an independent float64 recomputation, and large for a huge output after few iterations).
* FSNet (layers/peers/fsnet.py): nothing exact; when L-BFGS stops before its cap, the batch's mean squared
  violation is below its tolerance (its promise, asserted), and the violations it leaves are recorded as measured.
* E2ELR (layers/peers/e2elr.py) on PGLearn's economic dispatch: balance to rounding (asserted 1e-13 relative) and
  generator bounds exactly (asserted 0), line rows held by the slack, in float64 at every box vertex and random
  input, for random and 1e6-scaled network outputs; a demand beyond capacity leaves the balance violated, measured.
* LDF (methods/ldf.py): nothing exact; its multipliers move by the step times the epoch's mean violation, and the
  violations are what the metrics measure.
* cvxpylayers projection (layers/qp_projection.py): feasible to Clarabel's tolerance only (asserted 1e-6) on
  well-scaled outputs, silently infeasible on a 1e6-scaled one (shown; the layer's own check flags it), equal
  to the exact projection to ~1e-3 relative; no exactness is claimed.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from hardlinear.constraints.family import InputBox, InputDependentFamily, JointlyLinearFamily
from hardlinear.layers.peers.gauge import GaugeMap
from hardlinear.layers.peers.hardnet import HardNetAffLayer
from hardlinear.methods.base import Context, NotApplicable
from hardlinear.methods.hardnet_aff import HardNetAff
from hardlinear.problems import build_problem
from hardlinear.problems.base import Objective, Problem
from hardlinear.rules import solve_decision_rule

EPS = np.finfo(np.float64).eps
TOL64 = 1e-9


def dc3_like_family(seed: int, n: int = 12, m_eq: int = 4, m_ineq: int = 6, k: int = 4, varying_h: bool = False):
    """DC3's QP shape in miniature: ``A y = x`` (inputs on the equalities' right-hand side), ``H y <= h`` with
    ``h`` large enough that ``C(x)`` is non-empty on the box; ``H`` optionally affine in the input."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(m_eq, n))
    B_eq = np.zeros((m_eq, k + 1))
    B_eq[:, 1 : 1 + min(k, m_eq)] = np.eye(m_eq, min(k, m_eq))
    H0 = rng.normal(size=(m_ineq, n))
    B_ineq = np.zeros((m_ineq, k + 1))
    B_ineq[:, 0] = np.abs(H0 @ np.linalg.pinv(A)).sum(axis=1) + 1.0  # the least-norm solution is feasible
    box = InputBox.symmetric(k)
    if not varying_h:
        return JointlyLinearFamily(box=box, G=sp.csr_matrix(A), B_eq=B_eq, H=sp.csr_matrix(H0), B_ineq=B_ineq)
    G_stack = np.zeros((k + 1, m_eq, n))
    G_stack[0] = A
    H_stack = np.zeros((k + 1, m_ineq, n))
    H_stack[0] = H0
    H_stack[1:] = 0.05 * rng.normal(size=(k, m_ineq, n))
    B_ineq[:, 0] *= 2.0
    return InputDependentFamily(box=box, G_stack=G_stack, B_eq=B_eq, H_stack=H_stack, B_ineq=B_ineq)


def adversarial(d: int, batch: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    base = torch.randn(batch, d, generator=gen, dtype=torch.float64)
    return {"random": base, "huge": 1e6 * base, "zero": torch.zeros(batch, d, dtype=torch.float64)}


# --- HardNet-Aff ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("varying_h", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hardnet_aff_is_feasible_when_rows_have_full_rank(seed, varying_h):
    family = dc3_like_family(seed, varying_h=varying_h)
    layer = HardNetAffLayer(family, checks=8)
    gen = torch.Generator().manual_seed(seed)
    inputs = family.box.sample(64, gen)
    for kind, u in adversarial(layer.d, 64, gen).items():
        y = layer(inputs, u)
        assert torch.isfinite(y).all(), kind
        tamed = layer.last_stats["nonfinite"]
        xi = inputs
        if kind == "huge":  # 1e6-scaled: rows beyond the rounding cap are scaled back onto it (tested below)
            y, u, xi = y[~tamed], u[~tamed], inputs[~tamed]
        else:
            assert not tamed.any(), kind
        eq = family.eq_resid(xi, y).abs().amax(dim=1)
        ineq = family.ineq_resid(xi, y).amax(dim=1)
        M = layer.reduced.rows(xi, u)
        M = M.expand(len(xi), -1, -1) if M.dim() == 2 else M
        cond = torch.linalg.cond(M)
        s = layer.reduced.slack(xi, layer.reduced.particular(xi, u))
        size = M.abs().sum(dim=2).amax(dim=1) * u.abs().amax(dim=1) + s.abs().amax(dim=1)
        bound = 64 * EPS * cond * (1.0 + size)
        assert (ineq <= bound).all(), f"{kind}: worst excess {float((ineq - bound).max()):.2e}"
        assert (eq <= 1e-9 * (1.0 + size)).all(), kind
        # rows the network already satisfied are left where they were (M u* = min(M u, s))
        Mu = layer.reduced.times(layer.reduced.rows(xi, u), u)
        Mu_star = family.ineq_resid(xi, y) + s  # H y - h = M u* - s
        gap = (Mu_star - torch.minimum(Mu, s)).abs()
        assert (gap <= 64 * EPS * cond.unsqueeze(1) * (1.0 + size.unsqueeze(1))).all(), kind


def test_hardnet_aff_on_the_boundary_and_nan():
    family = dc3_like_family(3)
    layer = HardNetAffLayer(family)
    xi = family.box.sample(8, torch.Generator().manual_seed(0))
    u = torch.randn(8, layer.d, dtype=torch.float64)
    on_boundary = layer(xi, 1e3 * u)  # every violated row lands exactly on its bound
    again = layer(xi, _coords(layer, xi, on_boundary))
    assert torch.allclose(on_boundary, again, rtol=1e-12, atol=1e-9)  # a feasible point is a fixed point
    assert family.ineq_resid(xi, on_boundary).amax(dim=1).max() > -1e-6  # it is on the boundary
    u[0, 0] = float("nan")
    y = layer(xi, u)
    assert torch.isfinite(y).all() and layer.last_stats["nonfinite"].tolist() == [True] + [False] * 7
    assert torch.allclose(y[1:], layer(xi[1:], u[1:]), rtol=1e-14, atol=1e-14)  # the other rows: untouched
    assert family.ineq_resid(xi[:1], y[:1]).max() <= 1e-12


@pytest.mark.parametrize("varying_h", [False, True])
@pytest.mark.parametrize("kind", ["scaled_1e30", "scaled_1e300", "inf", "-inf", "nan"])
def test_hardnet_aff_hostile_outputs_stay_feasible_and_are_counted(kind, varying_h):
    """Issue 28: a 1e30-scaled output crossed DC3's bounds by 1.8e17, inf/NaN outputs gave NaN everywhere. Now every
    output is finite, within the documented bound ``rounding_tol (1 + ||s||_inf)``, and the hostile rows are
    counted; the gradient is finite too."""
    family = dc3_like_family(5, varying_h=varying_h)
    layer = HardNetAffLayer(family, checks=8)
    gen = torch.Generator().manual_seed(1)
    xi = family.box.sample(32, gen)
    u = torch.randn(32, layer.d, generator=gen, dtype=torch.float64)
    hostile = torch.arange(32) % 2 == 0
    bad = u.clone()
    if kind.startswith("scaled"):
        bad = bad * float(kind.split("_")[1])
    else:
        bad[:, 0] = float(kind)
    u = torch.where(hostile.unsqueeze(1), bad, u).requires_grad_(True)
    y = layer(xi, u)
    assert torch.isfinite(y).all()
    assert torch.equal(layer.last_stats["nonfinite"], hostile)
    s = layer.reduced.slack(xi, layer.reduced.particular(xi, y))
    viol = family.ineq_resid(xi, y).amax(dim=1)
    assert (viol <= layer.rounding_tol * (1.0 + s.abs().amax(dim=1))).all(), float(viol.max())
    # equalities: rounding relative to the output's size (a tamed row sits at the cap, ~1e6 here)
    assert (family.eq_resid(xi, y).abs().amax(dim=1) <= 1e-13 * (1.0 + y.abs().amax(dim=1))).all()
    y.sum().backward()
    assert torch.isfinite(u.grad).all()


class _Hostile(torch.nn.Module):
    """The network's output made hostile: scaled by a factor, or with one entry set to inf / NaN."""

    def __init__(self, net: torch.nn.Module, kind: str) -> None:
        super().__init__()
        self.net, self.kind = net, kind

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        out = self.net(xi)
        if self.kind == "1e30":
            return 1e30 * out
        return torch.cat([torch.full_like(out[:, :1], float(self.kind)), out[:, 1:]], dim=1)


@pytest.mark.parametrize("kind", ["1e30", "inf", "nan"])
def test_hardnet_aff_method_on_dc3_qp_under_the_issue_attack(kind):
    """The attack of issue 28 on the real problem (DC3's QP, 200 test inputs): before, a worst inequality
    violation of 1.8e17 (1e30) and NaN outputs everywhere (inf, NaN)."""
    problem = build_problem("dc3_qp")
    method = HardNetAff(rank_checks=0)
    method.setup(problem, Context())
    method.net = _Hostile(method.net, kind)
    xi = torch.as_tensor(problem.given_inputs["test"][:200], dtype=torch.float64)
    pred = method.eval().predict(xi)
    assert torch.isfinite(pred.y).all()
    viol = problem.family.ineq_resid(xi, pred.y).amax(dim=1)
    h = problem.family.B_ineq @ np.r_[1.0, np.zeros(problem.k)]
    assert float(viol.max()) <= 1e-9 * (1.0 + 10 * np.abs(h).max()), float(viol.max())
    assert problem.family.eq_resid(xi, pred.y).abs().max() <= 1e-9
    assert int(pred.extras["nonfinite"].sum()) == len(xi)


def _coords(layer, xi, y):
    """Free coordinates of ``y`` (``N' (y - c)``)."""
    (N,) = layer.reduced.consts.get(("N",), y)
    return (y - layer.reduced.particular(xi, y)) @ N


def test_hardnet_formula_without_full_rank_leaves_violations():
    """The lack of a guarantee, shown: with more inequality rows than free dimensions, ``M M^+ != I`` and the
    closed-form correction leaves violated rows; the layer therefore refuses such families."""
    family = dc3_like_family(4, n=6, m_eq=2, m_ineq=10)
    with pytest.raises(NotApplicable, match="10 inequality \\+ 2 equality rows for n = 6"):
        HardNetAffLayer(family)
    A, H = family.G.toarray(), family.H.toarray()
    N = np.linalg.svd(A)[2][2:].T
    M = H @ N
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(50):
        xi = rng.uniform(-1, 1, family.k)
        c = np.linalg.pinv(A) @ (family.B_eq @ np.r_[1.0, xi])
        s = family.B_ineq @ np.r_[1.0, xi] - H @ c
        u = 10.0 * rng.normal(size=N.shape[1])
        u_star = u - np.linalg.pinv(M) @ np.maximum(M @ u - s, 0.0)
        worst = max(worst, float(np.max(M @ u_star - s)))
    assert worst > 1e-3


def test_hardnet_refuses_the_paper_problems_with_counts():
    for name, form, phrase in [
        ("dcopf_14", "inequality", "84 inequality \\+ 38 equality rows for n = 39"),
        ("portfolio", "inequality", "9 inequality \\+ 2 equality rows for n = 7"),
    ]:
        with pytest.raises(NotApplicable, match=phrase):
            HardNetAff().setup(build_problem(name, form=form), Context())


def test_hardnet_method_trains_end_to_end_through_the_correction():
    family = dc3_like_family(5)
    rng = np.random.default_rng(5)
    Q = sp.csr_matrix(np.diag(rng.uniform(0.5, 1.5, family.n)))
    problem = Problem(family, Objective(c=rng.normal(size=family.n), Q=Q), "qp", "inequality", "dc3-like")
    method = HardNetAff(rank_checks=4)
    method.setup(problem, Context(network={"hidden": 16, "layers": 1, "batch_norm": False}))
    opt = torch.optim.Adam(method.parameters(), lr=1e-2)
    xi = problem.sample(64, torch.Generator().manual_seed(0))
    first = float(method.loss(xi, method(xi)).detach())
    for _ in range(30):
        opt.zero_grad()
        loss = method.loss(xi, method(xi))
        loss.backward()
        opt.step()
    assert float(loss.detach()) < first  # gradients flow through the correction
    y = method.predict(xi).y
    assert problem.ineq_resid(xi, y).max() <= TOL64 * 100 and problem.eq_resid(xi, y).abs().max() <= TOL64


# --- gauge map -----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dcopf14_gauge(tmp_path_factory):
    problem = build_problem("dcopf_14", form="inequality")
    rule = solve_decision_rule(problem, cache_dir=tmp_path_factory.mktemp("gauge-rule"))
    return problem, GaugeMap(problem.family, rule)


def _gauge_inputs(d: int, batch: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    z = 2 * torch.rand(batch, d, generator=gen, dtype=torch.float64) - 1
    vertices = torch.where(torch.rand(batch, d, generator=gen) < 0.5, -1.0, 1.0).to(torch.float64)
    return {
        "random": z,
        "boundary": z / z.abs().amax(dim=1, keepdim=True),  # ||z||_inf = 1: the output is on C(x)'s boundary
        "vertices": vertices,
        "huge_pre_tanh": torch.tanh(1e6 * torch.randn(batch, d, generator=gen, dtype=torch.float64)),
        "zero": torch.zeros(batch, d, dtype=torch.float64),
        "nan": torch.full((batch, d), float("nan"), dtype=torch.float64),
    }


def _check_feasible(problem_family, xi, y, what):
    assert torch.isfinite(y).all(), what
    h = problem_family.ineq_rhs(xi)
    g = problem_family.eq_rhs(xi)
    ineq = problem_family.ineq_resid(xi, y).amax(dim=1)
    eq = problem_family.eq_resid(xi, y).norm(dim=1) / (1 + g.norm(dim=1))
    assert (ineq <= TOL64).all() and (ineq / (1 + h.norm(dim=1)) <= TOL64).all(), f"{what}: {float(ineq.max()):.2e}"
    assert (eq <= TOL64).all(), f"{what}: eq {float(eq.max()):.2e}"


def test_gauge_map_is_feasible_on_dcopf14(dcopf14_gauge):
    problem, layer = dcopf14_gauge
    gen = torch.Generator().manual_seed(0)
    xi = torch.cat([problem.sample(128, gen), problem.box.vertices(limit=64, generator=gen)])
    for kind, z in _gauge_inputs(layer.d, len(xi), gen).items():
        y = layer(xi, z)
        _check_feasible(problem.family, xi, y, kind)
        if kind in ("boundary", "vertices", "huge_pre_tanh"):
            # on the boundary: the tightest row's slack is ~ margin * s0, not more
            s = -problem.family.ineq_resid(xi, y)
            s0 = -problem.family.ineq_resid(xi, layer.base(xi, y))
            assert ((s / s0).amin(dim=1) <= 2e-9).all(), kind


def test_gauge_map_is_a_bijection_onto_the_polytope(dcopf14_gauge):
    """Round trip z -> y -> z, and every solver optimum (on the boundary of C(x)) has a preimage in the ball."""
    problem, layer = dcopf14_gauge
    gen = torch.Generator().manual_seed(1)
    xi = problem.sample(16, gen)
    z = 2 * torch.rand(16, layer.d, generator=gen, dtype=torch.float64) - 1
    y = layer(xi, z)
    assert torch.allclose(_inverse(layer, xi, y), z, atol=1e-9)
    y_opt = torch.as_tensor(problem.solve(xi.numpy()).y, dtype=torch.float64)
    z_opt = _inverse(layer, xi, y_opt, margin=0.0)
    assert (z_opt.abs().amax(dim=1) <= 1 + 1e-6).all()  # optimum: on the boundary, level <= 1 (1 up to the solver)
    z_opt = z_opt / z_opt.abs().amax(dim=1, keepdim=True).clamp_min(1.0)
    assert torch.allclose(layer(xi, z_opt), y_opt, atol=1e-5 * (1 + float(y_opt.abs().max())))


def _inverse(layer: GaugeMap, xi, y, margin: float | None = None) -> torch.Tensor:
    """``z = u gamma(u) / ||u||_inf`` for ``u = N' (y - y0)``: the gauge map's inverse."""
    margin = layer.margin if margin is None else margin
    y0 = layer.base(xi, y)
    (N,) = layer.reduced.consts.get(("N",), y)
    u = (y - y0) @ N
    s0 = (1.0 - margin) * layer.reduced.slack(xi, y0)
    gamma = (layer.reduced.times(layer.reduced.rows(xi, u), u) / s0).amax(dim=1, keepdim=True)
    return u * gamma / u.abs().amax(dim=1, keepdim=True)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gauge_map_is_feasible_on_random_problems(seed):
    family = dc3_like_family(seed, n=8, m_eq=3, m_ineq=12)  # more rows than free dimensions: bounded polytope?
    family = JointlyLinearFamily(  # add +-y <= 10 so that it surely is
        box=family.box, G=family.G, B_eq=family.B_eq, H=sp.vstack([family.H, sp.eye(8), -sp.eye(8)]).tocsr(),
        B_ineq=np.vstack([family.B_ineq, np.c_[10.0 * np.ones((16, 1)), np.zeros((16, family.k))]]),
    )
    problem = Problem(family, Objective(c=np.ones(8)), "lp", "inequality", f"dc3-like-{seed}")
    rule = solve_decision_rule(problem, cache_dir=None)
    assert rule.t_star > 0
    layer = GaugeMap(family, rule)
    gen = torch.Generator().manual_seed(seed)
    xi = torch.cat([problem.sample(64, gen), problem.box.vertices()])
    for kind, z in _gauge_inputs(layer.d, len(xi), gen).items():
        _check_feasible(family, xi, layer(xi, z), kind)


def test_gauge_map_on_the_portfolio_with_input_dependent_rows(tmp_path):
    """The portfolio's inequality form (H(x) varies, G constant): feasible to the rule's own |t*| (~1e-8)."""
    problem = build_problem("portfolio", form="inequality")
    with pytest.warns(UserWarning, match="no strict margin"):
        rule = solve_decision_rule(problem, cache_dir=tmp_path, require_positive_margin=False)
    layer = GaugeMap(problem.family, rule)
    gen = torch.Generator().manual_seed(2)
    xi = torch.cat([problem.sample(64, gen), problem.box.vertices(limit=32, generator=gen)])
    slack_floor = abs(rule.t_star) + TOL64
    for kind, z in _gauge_inputs(layer.d, len(xi), gen).items():
        y = layer(xi, z)
        assert torch.isfinite(y).all()
        assert problem.family.ineq_resid(xi, y).max() <= slack_floor, kind
        assert problem.family.eq_resid(xi, y).abs().max() <= TOL64, kind


def test_gauge_map_refuses_unbounded_sets_unless_given_a_radius():
    # y1 = y2 and y1 <= 1: one free coordinate along (1, 1), bounded on one side only
    family = JointlyLinearFamily(
        box=InputBox.symmetric(1), G=sp.csr_matrix(np.array([[1.0, -1.0]])), B_eq=np.zeros((1, 2)),
        H=sp.csr_matrix(np.array([[1.0, 0.0]])), B_ineq=np.array([[1.0, 0.0]]),
    )
    rule = torch.nn.Linear(1, 2, dtype=torch.float64)  # y0 = 0: slack 1
    with torch.no_grad():
        rule.weight.zero_()
        rule.bias.zero_()
    with pytest.raises(NotApplicable, match="bounded"):
        GaugeMap(family, rule)
    layer = GaugeMap(family, rule, radius=5.0)
    xi = torch.zeros(2, 1, dtype=torch.float64)
    y = layer(xi, torch.tensor([[1.0], [-1.0]], dtype=torch.float64))
    ends = sorted(y[:, 0].tolist())  # one end on the bound (less the margin), the other at the radius
    assert ends[0] == pytest.approx(-5.0 / np.sqrt(2.0), abs=1e-12) and ends[1] == pytest.approx(1.0 - 1e-9, abs=1e-12)
    assert torch.allclose(y[:, 0], y[:, 1], atol=1e-15)


# --- cvxpylayers projection ----------------------------------------------------------------------------------
def test_projection_layer_is_feasible_to_solver_tolerance_only():
    from hardlinear.layers.peers.qp_projection import QPProjectionLayer
    from hardlinear.methods.post_projection import project

    problem = build_problem("portfolio", form="inequality")  # H(x) varies: a parameter matrix in the layer
    layer = QPProjectionLayer(problem.family)
    gen = torch.Generator().manual_seed(3)
    xi = problem.sample(6, gen)
    y_hat = torch.randn(6, problem.n, generator=gen, dtype=torch.float64) * torch.tensor([1.0, 1e6, 1.0, 1.0, 1.0, 1.0]).unsqueeze(1)
    y_hat[5, 0] = float("nan")
    y_hat.requires_grad_(True)
    y = layer(xi, y_hat)
    assert torch.isfinite(y).all()
    ok = torch.tensor([True, False, True, True, True, True])  # instance 1 is the 1e6-scaled one
    assert problem.ineq_resid(xi[ok], y.detach()[ok]).max() <= 1e-6
    assert problem.eq_resid(xi, y.detach()).abs().max() <= 1e-6
    # documented lack: at 1e6 the solver stops at an infeasible point (4.0 short on the government-bond row)
    # without raising; the layer's own check reports it
    assert problem.ineq_resid(xi[1:2], y.detach()[1:2]).max() > 1e-3
    assert torch.equal(layer.last_violation > 1e-6, ~ok)
    # the same projection as an exact QP solve, to ~sqrt(tolerance): the conic form's objective (a second-order
    # cone on ||y - y_hat||) is accurate to ~1e-8, and an objective error e moves the minimiser by ~sqrt(e)
    for i in (0, 2, 3, 4):
        exact = project(problem.family, xi[i].numpy(), y_hat[i].detach().numpy(), "clarabel").y
        scale = 1 + np.abs(exact).max()
        assert np.abs(y[i].detach().numpy() - exact).max() <= 1e-3 * scale
    y.sum().backward()
    assert torch.isfinite(y_hat.grad[:5]).all()


# --- Pinet and FSNet: feasible to a tolerance, recorded as measured ------------------------------------------
def _small_dc3(seed: int = 0):
    return build_problem("dc3_qp", num_var=20, num_eq=5, num_ineq=12, num_examples=64, seed=seed)


def _measured(problem, xi, y):
    """Largest absolute equality residual and inequality excess per instance, recomputed here in float64."""
    from hardlinear.evaluation.metrics import instance_metrics

    m = instance_metrics(problem, xi, y, torch.ones(len(xi), dtype=torch.float64))
    A, G, h = problem.data.A, problem.data.G, problem.data.h
    yn, xn = y.numpy(), xi.numpy()
    eq = np.abs(yn @ A.T - xn).max(axis=1)
    ineq = np.maximum(yn @ G.T - h, 0.0).max(axis=1)
    # the harness's metric is the raw excess (nothing rounded to zero): equal up to the summation order's rounding
    size = 1.0 + np.abs(G).sum(axis=1).max() * np.abs(yn).max() + np.abs(h).max()
    np.testing.assert_allclose(m["ineq_max"], ineq, rtol=0, atol=64 * EPS * size)
    np.testing.assert_allclose(m["eq_max"], eq, rtol=0, atol=64 * EPS * size)
    return eq, ineq, m


def _scale_last_layer(net: torch.nn.Module, factor: float) -> None:
    last = [mod for mod in net.modules() if isinstance(mod, torch.nn.Linear)][-1]
    with torch.no_grad():
        last.weight.mul_(factor)
        last.bias.add_(factor)


@pytest.mark.parametrize("scale", [1.0, 1e6])
def test_pinet_equalities_exact_inequalities_as_measured(scale):
    from hardlinear.methods.pinet import Pinet

    problem = _small_dc3()
    xi = torch.as_tensor(problem.given_inputs["test"], dtype=torch.float64)
    ctx = Context(dtype=torch.float64, network={"hidden": 16, "layers": 1, "batch_norm": False})
    few = Pinet(n_iter_test=3, equilibrate_iter=25)
    few.setup(problem, ctx)
    _scale_last_layer(few.net, scale)
    y = few.predict(xi).y
    eq, ineq, _ = _measured(problem, xi, y)
    assert (eq <= 1e-12 * (1.0 + np.abs(xi.numpy()).max() + scale)).all()
    if scale > 1:
        assert ineq.max() > 1e-3  # three iterations from a huge output: far from feasible, and recorded so
    many = Pinet(n_iter_test=20000, sigma=1.0, equilibrate_iter=0)
    many.setup(problem, ctx)
    many.net.load_state_dict(few.net.state_dict())
    y = many.predict(xi).y
    eq, ineq, _ = _measured(problem, xi, y)
    assert (eq <= 1e-12 * (1.0 + np.abs(xi.numpy()).max() + scale)).all()
    assert ineq.max() <= 1e-7 * scale  # DR converges: the excess shrinks with the iterations, never claimed 0


@pytest.mark.parametrize("scale", [1.0, 1e6])
def test_fsnet_reaches_its_tolerance_or_its_cap_and_is_recorded_as_measured(scale):
    from hardlinear.methods.fsnet import FSNet

    problem = _small_dc3(1)
    xi = torch.as_tensor(problem.given_inputs["test"], dtype=torch.float64)
    method = FSNet(max_iter=50, test_val_tol=1e-9)
    method.setup(problem, Context(dtype=torch.float64, network={"hidden": 16, "layers": 1, "batch_norm": False}))
    _scale_last_layer(method.net, scale)
    pred = method.predict(xi)
    eq, ineq, _ = _measured(problem, xi, pred.y)
    assert (pred.iterations == pred.iterations[0]).all()  # one shared stopping test for the batch
    mean_sq = float((problem.eq_resid(xi, pred.y).square().sum(1) + problem.ineq_resid(xi, pred.y).clamp(min=0).square().sum(1)).mean())
    if int(pred.iterations[0]) < 50:
        assert mean_sq < 1e-9  # its promise when it stops early (at the cap it promises nothing)
    assert eq.max() > 0.0  # feasibility to a tolerance only: the residual is not rounded away
    start = method.raw_output(xi)
    assert float(problem.eq_resid(xi, start).abs().max()) > 0.1 * scale  # it had that much to correct


def test_fsnet_at_its_iteration_cap_leaves_what_it_leaves():
    from hardlinear.methods.fsnet import FSNet

    problem = _small_dc3(2)
    xi = torch.as_tensor(problem.given_inputs["test"], dtype=torch.float64)
    method = FSNet(max_iter=2, unrolled=2, test_val_tol=1e-9)
    method.setup(problem, Context(dtype=torch.float64, network={"hidden": 16, "layers": 1, "batch_norm": False}))
    _scale_last_layer(method.net, 1e3)
    pred = method.predict(xi)
    eq, ineq, _ = _measured(problem, xi, pred.y)
    assert int(pred.iterations[0]) == 2 and max(eq.max(), ineq.max()) > 1e-3


# --- E2ELR and LDF (issue 42) ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ed14():
    return build_problem("ed", case="pglib_opf_case14_ieee")


@pytest.mark.parametrize("repair", ["sigmoid", "clamp"])
@pytest.mark.parametrize("scale", [1.0, 1e6])
def test_e2elr_is_exact_on_balance_and_bounds(ed14, repair, scale):
    from hardlinear.methods.e2elr import E2ELR

    method = E2ELR(bound_repair=repair)
    method.setup(ed14, Context(cache_dir=None, dtype=torch.float64))
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for layer in method.net.modules():
            if isinstance(layer, torch.nn.Linear):
                layer.weight.mul_(scale)
    method.eval()
    xi = torch.cat([ed14.box.vertices(256, generator=gen), ed14.box.sample(256, gen), ed14.sample(256, gen)])
    y = method.predict(xi).y
    assert y.dtype == torch.float64 and torch.isfinite(y).all()
    pg = y[:, ed14.variable_slices()["pg"]]
    net = ed14.network
    assert (pg >= torch.as_tensor(net.pmin)).all() and (pg <= torch.as_tensor(net.pmax)).all()  # exactly
    demand = ed14.loads(xi).sum(dim=1)
    assert ((pg.sum(dim=1) - demand).abs() <= 1e-13 * demand.abs()).all()
    assert ed14.ineq_resid(xi, y).max() <= 1e-13 and ed14.eq_resid(xi, y).abs().max() <= 1e-13


def test_e2elr_beyond_capacity_is_measured_not_hidden():
    from hardlinear.layers.peers.e2elr import proportional_response

    pmin, pmax = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    p = torch.full((2, 3), 0.5, dtype=torch.float64)
    out, ratio = proportional_response(p, torch.tensor([1.2, 4.0], dtype=torch.float64), pmin, pmax)
    assert out[0].sum().item() == pytest.approx(1.2, abs=1e-15) and ratio[0] < 1
    assert torch.equal(out[1], pmax) and ratio[1] == 1  # 4.0 > capacity 3.0: at the bounds, balance short by 1.0
    assert (out[1].sum() - 4.0).abs().item() == pytest.approx(1.0)


def test_supervised_ldf_is_the_mse_to_solutions_plus_its_multiplier_terms(ed14):
    """``fit="supervised"`` (ML4OPF's default base loss): the MSE to the reference solutions, plus the same
    ``lambda' |e| + mu' v`` as the objective fit, on the same output; its violations feed the multiplier update."""
    from hardlinear.methods.ldf import LDF

    method = LDF(fit="supervised", step_size=1e-5)
    assert method.supervised and method.describe()["variant"] == "supervised"
    method.setup(ed14, Context(cache_dir=None, dtype=torch.float64))
    gen = torch.Generator().manual_seed(5)
    method.lam.fill_(3.0)
    method.mu.uniform_(0.0, 2.0, generator=gen)
    xi = ed14.sample(16, gen)
    y_ref = torch.randn(16, ed14.n, dtype=torch.float64, generator=gen)
    method.train()
    loss = method.supervised_loss(xi, y_ref)
    with torch.no_grad():
        y = method(xi)
        eq, ineq = ed14.eq_resid(xi, y).abs(), ed14.ineq_resid(xi, y).clamp(min=0.0)
        expected = ((y - y_ref) ** 2).mean() + (eq @ method.lam + ineq @ method.mu).mean()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-12)
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in method.net.parameters())
    means = method.mean_violations()
    assert means is not None and torch.allclose(means[0], eq.mean(dim=0), rtol=1e-12)


def test_ldf_with_a_derived_slack_predicts_the_dispatch_and_fits_it(ed14):
    """``thermal_slack="derived"``: the network predicts ``pg``; the slack is the smallest that holds the line rows
    (what ``repair_slack`` would leave as it is); the supervised MSE is on ``pg`` alone."""
    from hardlinear.methods.ldf import LDF

    method = LDF(fit="supervised", thermal_slack="derived")
    method.setup(ed14, Context(cache_dir=None, dtype=torch.float64))
    pg = ed14.variable_slices()["pg"]
    gen = torch.Generator().manual_seed(11)
    method.lam.fill_(2.0)
    xi = ed14.sample(16, gen)
    y_ref = torch.randn(16, ed14.n, dtype=torch.float64, generator=gen)
    method.train()
    assert method.regress(xi).shape == (16, pg.stop - pg.start)
    loss = method.supervised_loss(xi, y_ref)
    with torch.no_grad():
        y = method(xi)
        assert y.shape == (16, ed14.n) and torch.equal(ed14.repair_slack(xi, y), y)
        eq, ineq = ed14.eq_resid(xi, y).abs(), ed14.ineq_resid(xi, y).clamp(min=0.0)
        expected = ((y[:, pg] - y_ref[:, pg]) ** 2).mean() + (eq @ method.lam + ineq @ method.mu).mean()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-12)
    assert method.describe()["variant"] == "supervised derived slack"


def test_ldf_derived_slack_is_refused_where_there_is_no_dispatch():
    from hardlinear.methods.ldf import LDF

    with pytest.raises(NotApplicable, match="method.thermal_slack=predicted"):
        LDF(thermal_slack="derived").setup(build_problem("dcopf_14"), Context(cache_dir=None, dtype=torch.float64))


def test_ldf_refuses_an_unknown_fit():
    from hardlinear.methods.ldf import LDF

    with pytest.raises(ValueError, match="fit must be one of .*'objective', 'supervised'"):
        LDF(fit="mse")


def test_ldf_multipliers_follow_the_mean_violation(ed14):
    from hardlinear.methods.ldf import LDF

    method = LDF(step_size=10.0, update_every=2)
    method.setup(ed14, Context(cache_dir=None, dtype=torch.float64))
    method.train()
    gen = torch.Generator().manual_seed(3)
    for epoch in (0, 1):  # epoch 0 is not an update epoch; epoch 1 is, with its own batch's violations
        xi = ed14.sample(32, gen)
        y = method(xi)
        method.loss(xi, y).backward()
        if epoch == 0:
            method.after_epoch(0)
            assert torch.all(method.lam == 0) and torch.all(method.mu == 0)
    eq = ed14.eq_resid(xi, y.detach()).abs().mean(dim=0)
    ineq = ed14.ineq_resid(xi, y.detach()).clamp(min=0).mean(dim=0)
    method.after_epoch(1)
    assert torch.allclose(method.lam, 10.0 * eq, rtol=1e-12) and torch.allclose(method.mu, 10.0 * ineq, rtol=1e-12)
    assert (method.mu > 0).any()  # an untrained network violates rows, and nothing rounds them away
