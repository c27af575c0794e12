"""Issue 41, item 1: the gradient our Pinet trains with, in the configuration of Pinet's commit e662b15
(``conf/experiment/pinet_e662b15.yaml``: sigma 1, omega 1.7, 100 DR iterations from ``(y_raw, 0)``, no Ruiz),
against pinet-hcnn 0.2.0's and against the exact gradient, on DC3's convex QP.

What must hold, and to what tolerance:

* **Same as Pinet's layer** (needs ``pinet-hcnn``; skipped without it): for each backward mode at e662b15's
  iteration counts (implicit: 5 BiCGSTAB iterations; fixed point: 25; unrolled: 100 iterations), pinet-hcnn
  0.2.0 given the same start ``s0 = (y_raw, 0)`` gives the same output (1e-11 absolute; measured 5e-14) and the
  same vjp of the training loss with respect to ``y_raw`` (1e-9 relative; measured 1e-14 here, 2e-13 at a trained network's output). The layer of
  e662b15 itself (not on PyPI) agrees with both to the same digits: ``benchmarks/investigations/pinet_gradcheck.py``, which also
  reports how far each mode's gradient is from the exact one at e662b15's counts (not a correctness property: the
  5-iteration solve is inexact in Pinet's code as in ours; docs/pinet.md, "Pinet's published runs").
* **Exact when converged**: with the forward run to convergence (1,000 iterations; inequality excess 1e-13) and the adjoint solved
  (BiCGSTAB to 1e-13, or 1,000 fixed-point steps), the implicit and fixed-point vjps equal the gradient through
  the exact Euclidean projection, ``(I - C'(CC')^+ C) grad f`` with ``C`` the equality rows and the active
  inequality rows (1e-8 relative; measured 4e-13).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from hardlinear.layers.douglas_rachford import DouglasRachfordProjection
from hardlinear.problems.dc3 import dc3_simple_data

try:
    import jax
    import pinet

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
except ImportError:
    pinet = None

needs_pinet = pytest.mark.skipif(
    pinet is None,
    reason="pinet-hcnn (import pinet) is not installed: pip install jax equinox jaxtyping beartype && "
    "pip install --no-deps pinet-hcnn==0.2.0 (docs/pinet.md)",
)

_spec = importlib.util.spec_from_file_location("pinet_gradcheck", Path(__file__).resolve().parents[1] / "benchmarks" / "investigations" / "pinet_gradcheck.py")
gradcheck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gradcheck)  # pinet-hcnn's layer in e662b15's configuration (hcnn_layer), and its settings
SIGMA, OMEGA, K = gradcheck.SIGMA, gradcheck.OMEGA, gradcheck.K
E662B15_BACKWARDS = {"implicit": 5, "fixed_point": 25, "unrolled": 100}


@pytest.fixture(scope="module")
def batch():
    """DC3's convex QP data, 8 training inputs, a ``y_raw`` with 10 to 20 active inequality rows each."""
    data = dc3_simple_data()
    xi = data.X[:8]
    y_raw = 2.0 * np.random.default_rng(0).normal(size=(8, data.A.shape[1]))
    return data, xi, y_raw


def loss_torch(data, y: torch.Tensor, nonconvex: bool) -> torch.Tensor:
    Q, p = torch.tensor(data.Q), torch.tensor(data.p)
    lin = torch.sin(y) @ p if nonconvex else y @ p
    return (0.5 * ((y @ Q) * y).sum(1) + lin).mean()


def ours(data, xi, y_raw, backward, n_iter_bwd, n_iter=K, nonconvex=False, bwd_tol=1e-5):
    """The layer as Pinet(start="raw") calls it: s0 = (y_raw, 0), built from y_raw (unrolled differentiates it)."""
    layer = DouglasRachfordProjection(data.A, data.G, sigma=SIGMA, omega=OMEGA, backward=backward,
                                      n_iter_bwd=n_iter_bwd, bwd_tol=bwd_tol)
    yr = torch.tensor(y_raw, requires_grad=True)
    s0 = torch.cat([yr, yr.new_zeros(yr.shape[0], data.G.shape[0])], dim=1)
    y, _ = layer(yr, torch.tensor(xi), torch.tensor(data.h)[None], n_iter=n_iter, s0=s0)
    loss_torch(data, y, nonconvex).backward()
    return y.detach().numpy(), yr.grad.numpy()


def pinet_hcnn(data, xi, y_raw, backward, n_iter_bwd, cotangents):
    """pinet-hcnn 0.2.0's output, and its vjp for each cotangent of the output (one compiled function)."""
    run = gradcheck.hcnn_layer(data, xi, backward, n_iter_bwd)

    @jax.jit
    def vjps(yr, cts):
        y, vjp = jax.vjp(run, yr)
        return y, jax.vmap(lambda c: vjp(c)[0])(cts)

    y, g = vjps(jnp.asarray(y_raw), jnp.asarray(np.stack(cotangents)))
    return np.asarray(y), list(np.asarray(g))


def cotangent(data, y: np.ndarray, nonconvex: bool) -> np.ndarray:
    """d/dy of the training loss (mean objective over the batch) at the layer's output ``y``."""
    lin = np.cos(y) * data.p if nonconvex else data.p
    return (y @ data.Q + lin) / y.shape[0]


def rel(a, b) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@needs_pinet
@pytest.mark.parametrize("backward", list(E662B15_BACKWARDS))
def test_same_gradient_as_pinet_at_e662b15_settings(batch, backward):
    data, xi, y_raw = batch
    nb = E662B15_BACKWARDS[backward]
    got = {nonconvex: ours(data, xi, y_raw, backward, nb, nonconvex=nonconvex) for nonconvex in (False, True)}
    y = got[False][0]
    # the cotangents of both DC3 objectives at the output (ours and theirs: the outputs agree to 1e-11)
    y_ref, g_ref = pinet_hcnn(data, xi, y_raw, backward, nb, [cotangent(data, y, nc) for nc in (False, True)])
    np.testing.assert_allclose(y, y_ref, rtol=0, atol=1e-11)
    for nonconvex, ref in zip((False, True), g_ref):
        g = got[nonconvex][1]
        assert rel(g, ref) < 1e-9, f"{backward}, nonconvex={nonconvex}: vjp differs from pinet-hcnn's by {rel(g, ref):.1e}"


def projection_gradient(data, y: np.ndarray) -> np.ndarray:
    """``(I - C'(CC')^+ C) grad f(y)`` per instance, ``C`` the equality and active inequality rows at ``y``."""
    g = (y @ data.Q + data.p) / y.shape[0]
    out = np.empty_like(y)
    for i in range(y.shape[0]):
        C = np.vstack([data.A, data.G[data.G @ y[i] - data.h > -1e-7]])
        out[i] = g[i] - C.T @ np.linalg.lstsq(C @ C.T, C @ g[i], rcond=None)[0]
    return out


@pytest.mark.parametrize("backward, n_iter_bwd", [("implicit", 200), ("fixed_point", 1000)])
def test_converged_implicit_gradient_is_the_projection_gradient(batch, backward, n_iter_bwd):
    data, xi, y_raw = batch
    xi, y_raw = xi[:8], y_raw[:8]
    y, g = ours(data, xi, y_raw, backward, n_iter_bwd, n_iter=1000, bwd_tol=1e-13)
    assert np.maximum(y @ data.G.T - data.h, 0).max() < 1e-10  # converged: the active set is the projection's
    n_active = (y @ data.G.T - data.h > -1e-7).sum(1)
    assert n_active.min() >= 5  # the inequalities shape the gradient here
    assert rel(g, projection_gradient(data, y)) < 1e-8
