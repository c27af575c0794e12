"""FSNet's feasibility step (layers/peers/fsnet.py) and method (methods/fsnet.py): the two-loop recursion against
the dense L-BFGS inverse-Hessian formula, convergence on a feasible family, the truncated unrolling (same values
as the untaped solve, gradients through the taped part), its loss switch and its tolerance schedule."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hardlinear.layers.peers.fsnet import LBFGSSettings, _direction, lbfgs_feasibility, squared_violation
from hardlinear.methods.fsnet import FSNet


def dense_lbfgs_direction(g: np.ndarray, S: list[np.ndarray], Y: list[np.ndarray]) -> np.ndarray:
    """``-H g`` with ``H`` built by the BFGS inverse update from ``gamma I`` over the pairs, oldest first."""
    n = g.shape[0]
    s, y = S[-1], Y[-1]
    H = (s @ y) / (y @ y) * np.eye(n)
    for s, y in zip(S, Y):
        rho = 1.0 / (s @ y)
        V = np.eye(n) - rho * np.outer(y, s)
        H = V.T @ H @ V + rho * np.outer(s, s)
    return -H @ g


def test_two_loop_recursion_is_the_lbfgs_inverse_hessian():
    rng = np.random.default_rng(0)
    n, B, m = 7, 3, 4
    A = rng.normal(size=(n, n))
    Q = A @ A.T + n * np.eye(n)  # curvature pairs of a convex quadratic: s'y > 0
    S = [rng.normal(size=(B, n)) for _ in range(m)]
    Y = [s @ Q for s in S]
    g = rng.normal(size=(B, n))
    got = _direction(torch.tensor(g), [torch.tensor(s) for s in S], [torch.tensor(y) for y in Y]).numpy()
    for b in range(B):
        want = dense_lbfgs_direction(g[b], [s[b] for s in S], [y[b] for y in Y])
        np.testing.assert_allclose(got[b], want, rtol=1e-6)  # the 1e-10 guard in rho is the only difference
    assert np.allclose(_direction(torch.tensor(g), [], []).numpy(), -0.1 * g)


def feasible_rows(seed: int, n: int = 10, m_eq: int = 3, m: int = 6, batch: int = 8):
    rng = np.random.default_rng(seed)
    G, H = torch.tensor(rng.normal(size=(m_eq, n))), torch.tensor(rng.normal(size=(m, n)))
    g = torch.tensor(rng.uniform(-1, 1, size=(batch, m_eq)))
    h = (g @ torch.linalg.pinv(G).T @ H.T) + 0.5

    def rows(y: torch.Tensor) -> torch.Tensor:
        return squared_violation(y @ G.T - g, y @ H.T - h)

    return rows, torch.tensor(3.0 * rng.normal(size=(batch, n)))


def test_lbfgs_reaches_the_tolerance_on_a_feasible_family():
    rows, y0 = feasible_rows(0)
    state = lbfgs_feasibility(rows, y0, LBFGSSettings(max_iter=300), val_tol=1e-12, iterations=300)
    assert state.iterations < 300
    assert float(rows(state.y.detach()).mean()) < 1e-12
    assert float(rows(y0).mean()) > 1.0  # it had work to do


def test_truncated_unrolling_keeps_the_values_and_passes_gradients_through_the_taped_part():
    rows, y0 = feasible_rows(1, batch=4)
    s = LBFGSSettings(max_iter=12)
    plain = lbfgs_feasibility(rows, y0, s, val_tol=1e-14, iterations=12)
    y0_ = y0.clone().requires_grad_(True)
    taped = lbfgs_feasibility(rows, y0_, s, val_tol=1e-14, iterations=5, differentiable=True)
    tail = lbfgs_feasibility(rows, y0_, s, val_tol=1e-14, iterations=7, state=taped)
    y = taped.y + (tail.y - taped.y).detach()
    torch.testing.assert_close(y.detach(), plain.y.detach(), rtol=0, atol=1e-10)
    (grad,) = torch.autograd.grad(y.square().sum(), y0_)
    assert torch.isfinite(grad).all() and grad.abs().max() > 0
    assert taped.y.requires_grad and not tail.y.requires_grad


def test_tolerance_schedule_is_fsnets():
    method = FSNet(val_tol=1e-7, decay_tol_step=100)
    tols = {epoch: method.after_epoch(epoch)["fsnet/train_val_tol"] for epoch in (0, 97, 98, 197, 198, 298, 398)}
    # FSNet divides by 10 at the start of every epoch index e with (e + 1) % 100 == 0, clipped to [1e-9, 1e-6]
    assert tols[0] == tols[97] == 1e-7
    assert tols[98] == 1e-8 and tols[197] == 1e-8
    assert tols[198] == tols[298] == tols[398] == 1e-9


@pytest.mark.parametrize("name, rtol", [("dc3_qp", 1e-12), ("dcopf_14", 1e-6)])
def test_closed_form_inference_follows_the_autograd_iteration(name, rtol, tmp_path):
    """Inference with constant rows runs the scripted L-BFGS with the gradient in closed form (issue 40): the same
    iterations and line-search evaluations as the autograd path, the same outputs to rounding (dcopf_14's rows are
    ill-conditioned and 50 L-BFGS iterations amplify the rounding: 6e-8 measured on 64 inputs)."""
    from hardlinear.methods.base import Context
    from hardlinear.methods.fsnet import FSNet
    from hardlinear.problems import build_problem

    problem = build_problem(name)
    method = FSNet(output_box=5.0 if name == "dc3_qp" else None)
    method.setup(problem, Context(cache_dir=str(tmp_path), progress=False))
    method.eval()
    assert method._rows_T is not None
    xi = problem.sample(16, generator=torch.Generator().manual_seed(0))
    fast = method.predict(xi)
    method._rows_T = None  # the autograd path
    slow = method.predict(xi)
    assert int(fast.iterations[0]) == int(slow.iterations[0]) > 0
    assert fast.extras == slow.extras
    assert float((fast.y - slow.y).abs().max() / slow.y.abs().max()) <= rtol
