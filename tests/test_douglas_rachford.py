"""Pinet's Douglas-Rachford projection (layers/douglas_rachford.py) against an independent NumPy transcription of
the iteration, its limit against an exact QP projection (Clarabel), its three backward passes against each other
and against finite differences (float64 gradcheck), Ruiz equilibration, and the method's refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hardlinear.errors import NotApplicable
from hardlinear.layers.douglas_rachford import DouglasRachfordProjection, RuizSettings, ruiz_equilibration
from hardlinear.methods.base import Context
from hardlinear.methods.pinet import Pinet
from hardlinear.problems import build_problem


def instance(seed: int, n: int = 8, m_eq: int = 3, m: int = 5, batch: int = 4):
    """A feasible random instance: ``G y = g``, ``H y <= u`` with the least-norm solution strictly inside."""
    rng = np.random.default_rng(seed)
    G, H = rng.normal(size=(m_eq, n)), rng.normal(size=(m, n))
    g = rng.uniform(-1, 1, size=(batch, m_eq))
    y_ln = g @ np.linalg.pinv(G).T
    u = y_ln @ H.T + rng.uniform(0.1, 1.0, size=(batch, m))
    y_raw = 3.0 * rng.normal(size=(batch, n))
    return G, H, g, u, y_raw


def numpy_dr(G, H, g, u, y_raw, sigma, omega, K, ruiz_iter):
    """The iteration written out in NumPy, independently of the module (Pinet's formulas, notes in the docstring)."""
    n, m_eq, m = G.shape[1], G.shape[0], H.shape[0]
    A = np.block([[G, np.zeros((m_eq, m))], [H, -np.eye(m)]])
    if ruiz_iter:
        A, dr, dc = ruiz_equilibration(A, RuizSettings(max_iter=ruiz_iter))
    else:
        dr, dc = np.ones(A.shape[0]), np.ones(A.shape[1])
    Ap = np.linalg.pinv(A)
    b = np.c_[g, np.zeros((len(g), m))] * dr
    d = dc[:n]
    hi = u / dc[n:]
    s = np.zeros((len(g), n + m))
    for _ in range(K):
        z = s - (s @ A.T - b) @ Ap.T
        r = 2 * z - s
        t = np.concatenate([(2 * sigma * d * y_raw + r[:, :n]) / (1 + 2 * sigma * d**2), np.minimum(r[:, n:], hi)], axis=1)
        s = s + omega * (t - z)
    z = s - (s @ A.T - b) @ Ap.T
    return d * z[:, :n]


@pytest.mark.parametrize("ruiz_iter", [0, 25])
@pytest.mark.parametrize("seed", [0, 1])
def test_forward_matches_a_numpy_transcription(seed, ruiz_iter):
    G, H, g, u, y_raw = instance(seed)
    layer = DouglasRachfordProjection(G, H, ruiz=RuizSettings(max_iter=ruiz_iter), sigma=0.7, omega=1.7)
    y, _ = layer(torch.tensor(y_raw), torch.tensor(g), torch.tensor(u), n_iter=40)
    np.testing.assert_allclose(y.numpy(), numpy_dr(G, H, g, u, y_raw, 0.7, 1.7, 40, ruiz_iter), rtol=0, atol=1e-12)


@pytest.mark.parametrize("ruiz_iter, K", [(0, 1000), (25, 20000)])
def test_equalities_hold_at_every_iteration_count_and_the_limit_is_the_projection(ruiz_iter, K):
    """Equalities to rounding after any number of iterations; the limit is the Euclidean projection (Clarabel's,
    to its tolerance), with or without equilibration (which changes the path, here slowing it at sigma = 1)."""
    import cvxpy as cp

    G, H, g, u, y_raw = instance(3)
    layer = DouglasRachfordProjection(G, H, ruiz=RuizSettings(max_iter=ruiz_iter), sigma=1.0, omega=1.7)
    for k in (0, 1, 5, 50):
        y, _ = layer(torch.tensor(y_raw), torch.tensor(g), torch.tensor(u), n_iter=k)
        assert np.abs(y.numpy() @ G.T - g).max() <= 1e-12, k
    y, _ = layer(torch.tensor(y_raw), torch.tensor(g), torch.tensor(u), n_iter=K)
    for b in range(len(g)):
        v = cp.Variable(G.shape[1])
        cp.Problem(cp.Minimize(cp.sum_squares(v - y_raw[b])), [G @ v == g[b], H @ v <= u[b]]).solve(solver=cp.CLARABEL)
        np.testing.assert_allclose(y[b].numpy(), v.value, atol=1e-5)
    assert np.maximum(y.numpy() @ H.T - u, 0).max() <= 1e-8


def test_warm_start_continues_the_sequence():
    G, H, g, u, y_raw = instance(4)
    layer = DouglasRachfordProjection(G, H)
    args = (torch.tensor(y_raw), torch.tensor(g), torch.tensor(u))
    y20, _ = layer(*args, n_iter=20)
    _, s10 = layer(*args, n_iter=10)
    y_warm, _ = layer(*args, n_iter=10, s0=s10)
    torch.testing.assert_close(y_warm, y20, rtol=0, atol=1e-13)


def test_box_on_y_is_respected_in_the_limit():
    G, H, g, u, y_raw = instance(5)
    lo, hi = -2.0 * np.ones(G.shape[1]), 2.0 * np.ones(G.shape[1])
    layer = DouglasRachfordProjection(G, H, lo=lo, hi=hi, ruiz=RuizSettings(max_iter=10))
    y, _ = layer(torch.tensor(y_raw), torch.tensor(g), torch.tensor(u), n_iter=2000)
    assert (y.abs() <= 2.0 + 1e-7).all()
    assert np.abs(y.numpy() @ G.T - g).max() <= 1e-12


@pytest.mark.parametrize(
    "backward, ruiz_iter, K",
    [("implicit", 0, 800), ("fixed_point", 0, 800), ("implicit", 25, 5000)],  # equilibrated: slower to converge
)
def test_implicit_gradients_equal_the_unrolled_ones_at_the_fixed_point(backward, ruiz_iter, K):
    """float64: at a converged fixed point the implicit-function gradient is the limit of the unrolled one."""
    G, H, g, u, y_raw = instance(6, n=6, m_eq=2, m=4, batch=3)
    grads = {}
    for mode in (backward, "unrolled"):
        layer = DouglasRachfordProjection(
            G, H, ruiz=RuizSettings(max_iter=ruiz_iter), sigma=0.5, omega=1.7, backward=mode, n_iter_bwd=500, bwd_tol=1e-13
        )
        yr = torch.tensor(y_raw, requires_grad=True)
        y, _ = layer(yr, torch.tensor(g), torch.tensor(u), n_iter=K)
        (y * torch.linspace(-1, 1, y.numel(), dtype=torch.float64).reshape(y.shape)).sum().backward()
        grads[mode] = yr.grad
    torch.testing.assert_close(grads[backward], grads["unrolled"], rtol=1e-9, atol=1e-11)


def test_unrolled_gradient_passes_gradcheck_and_implicit_agrees_with_it():
    """torch.autograd.gradcheck (finite differences, float64) of the projection after K iterations, then the
    implicit backward against it on the same tiny instance."""
    G, H, g, u, y_raw = instance(7, n=5, m_eq=2, m=3, batch=2)
    g_t, u_t = torch.tensor(g), torch.tensor(u)
    unrolled = DouglasRachfordProjection(G, H, sigma=0.8, backward="unrolled")
    implicit = DouglasRachfordProjection(G, H, sigma=0.8, backward="implicit", n_iter_bwd=400, bwd_tol=1e-14)
    yr = torch.tensor(y_raw, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v: unrolled(v, g_t, u_t, n_iter=600)[0], (yr,), eps=1e-6, atol=1e-6)
    J_unrolled = torch.autograd.functional.jacobian(lambda v: unrolled(v, g_t, u_t, n_iter=600)[0], yr)
    J_implicit = torch.autograd.functional.jacobian(lambda v: implicit(v, g_t, u_t, n_iter=600)[0], yr)
    torch.testing.assert_close(J_implicit, J_unrolled, rtol=1e-7, atol=1e-8)


def test_ruiz_balances_rows_and_columns():
    rng = np.random.default_rng(0)
    M = rng.normal(size=(6, 9)) * np.logspace(-3, 3, 6)[:, None]
    scaled, d_r, d_c = ruiz_equilibration(M, RuizSettings(max_iter=25))
    np.testing.assert_allclose(scaled, M * d_r[:, None] * d_c[None, :])
    before = np.ptp(np.log(np.linalg.norm(M, axis=1)))
    after = np.ptp(np.log(np.linalg.norm(scaled, axis=1)))
    assert after < 0.1 * before and (d_r > 0).all() and (d_c > 0).all()
    off = ruiz_equilibration(M, RuizSettings(max_iter=0))
    assert np.array_equal(off[0], M)


def test_bad_settings_are_refused_before_any_work():
    G, H, *_ = instance(0)
    with pytest.raises(ValueError, match="omega"):
        DouglasRachfordProjection(G, H, omega=2.0)
    with pytest.raises(ValueError, match="backward"):
        DouglasRachfordProjection(G, H, backward="adjoint")
    with pytest.raises(ValueError, match="mode"):
        RuizSettings(mode="newton")
    layer = DouglasRachfordProjection(G, H)
    g = torch.zeros(1, G.shape[0], requires_grad=True)
    with pytest.raises(ValueError, match="y_raw only"):
        layer(torch.zeros(1, G.shape[1], requires_grad=True), g, torch.ones(1, H.shape[0]))


def test_pinet_refuses_an_input_dependent_left_hand_side():
    problem = build_problem("portfolio")
    with pytest.raises(NotApplicable, match="depend"):
        Pinet().setup(problem, Context())


def numpy_dr_e662b15(G, H, g, u, y_raw, sigma, omega, K):
    """Pinet's iteration as commit e662b15 wrote it: governing sequence from (y_raw, 0), prox (y_raw + r / (2 sigma))
    / (1 + 1 / (2 sigma)), no equilibration."""
    n, m_eq, m = G.shape[1], G.shape[0], H.shape[0]
    A = np.block([[G, np.zeros((m_eq, m))], [H, -np.eye(m)]])
    Ap = np.linalg.pinv(A)
    b = np.c_[g, np.zeros((len(g), m))]
    s = np.c_[y_raw, np.zeros((len(g), m))]
    for _ in range(K):
        z = s - (s @ A.T - b) @ Ap.T
        r = 2 * z - s
        t = np.c_[(y_raw + r[:, :n] / (2 * sigma)) / (1 + 1 / (2 * sigma)), np.minimum(r[:, n:], u)]
        s = s + omega * (t - z)
    return (s - (s @ A.T - b) @ Ap.T)[:, :n]


def test_raw_start_matches_e662b15_and_changes_the_output():
    G, H, g, u, y_raw = instance(3)
    layer = DouglasRachfordProjection(G, H, sigma=1.0, omega=1.7)
    yt, gt, ut = torch.tensor(y_raw), torch.tensor(g), torch.tensor(u)
    s0 = torch.cat([yt, torch.zeros(len(g), H.shape[0], dtype=yt.dtype)], dim=1)
    y_raw_start, _ = layer(yt, gt, ut, n_iter=30, s0=s0)
    expected = numpy_dr_e662b15(G, H, g, u, y_raw, 1.0, 1.7, 30)
    np.testing.assert_allclose(y_raw_start.numpy(), expected, rtol=0, atol=1e-12)
    y_zero_start, _ = layer(yt, gt, ut, n_iter=30)
    assert (y_raw_start - y_zero_start).abs().max() > 1e-6  # the start matters after finitely many steps


def test_pinet_start_option():
    problem = build_problem("dcopf_14")
    with pytest.raises(ValueError, match="start must be one of"):
        Pinet(start="warm")
    xi = problem.sample(3, torch.Generator().manual_seed(0))
    outs = {}
    for start in ("zero", "raw"):
        torch.manual_seed(0)
        method = Pinet(start=start, n_iter_test=5)
        method.setup(problem, Context())
        outs[start] = method.predict(xi).y
        assert method.describe()["variant"] == ("start=raw" if start == "raw" else "")
    assert (outs["raw"] - outs["zero"]).abs().max() > 1e-9


def test_bicgstab_stops_on_a_breakdown_instead_of_returning_nan():
    """A skew system where r_hat is orthogonal to A p at the first step: BiCGSTAB's alpha would divide by zero."""
    from hardlinear.layers.douglas_rachford import _bicgstab

    A = torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)
    w = _bicgstab(lambda x: A @ x, torch.tensor([1.0, 0.0], dtype=torch.float64), maxiter=10, tol=1e-12)
    assert torch.isfinite(w).all()
