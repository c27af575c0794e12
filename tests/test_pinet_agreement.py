"""Our Douglas-Rachford layer against the real Pinet package (PyPI ``pinet-hcnn``, JAX) on the same instances:
the same points projected with the same settings and iteration counts give the same outputs (float64), and
the same implicit gradients.

Needs the optional ``peers`` extra; without it the module is skipped. The package's own imports are
``jax, equinox, jaxtyping, beartype``; its declared dependencies are the heavy benchmark stack, so the recipe is
``pip install jax equinox jaxtyping beartype && pip install --no-deps pinet-hcnn`` (docs/pinet.md).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

pinet = pytest.importorskip("pinet")
jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

from hardlinear.layers.douglas_rachford import DouglasRachfordProjection, RuizSettings  # noqa: E402
from hardlinear.problems.dc3 import dc3_simple_data  # noqa: E402


def random_instance(seed: int, n: int, m_eq: int, m: int, batch: int, two_sided: bool):
    rng = np.random.default_rng(seed)
    G = rng.normal(size=(m_eq, n)) * rng.uniform(0.1, 10.0, size=(m_eq, 1))  # badly scaled rows: Ruiz has work
    H = rng.normal(size=(m, n))
    g = rng.uniform(-1, 1, size=(batch, m_eq))
    inside = g @ np.linalg.pinv(G).T @ H.T
    u = np.broadcast_to((inside.max(axis=0) + 0.5)[None], (batch, m)).copy()  # constant u, as Pinet's ub here
    l = (inside.min(axis=0) - 0.5)[None].repeat(batch, 0) if two_sided else np.full((batch, m), -np.inf)
    y_raw = 2.0 * rng.normal(size=(batch, n))
    return G, H, g, l[:1], u[:1], y_raw


def dc3_instance(batch: int = 16):
    data = dc3_simple_data()
    y_raw = np.random.default_rng(0).normal(size=(batch, data.A.shape[1]))
    m = data.G.shape[0]
    return data.A, data.G, data.X[-batch:], np.full((1, m), -np.inf), data.h[None], y_raw


def pinet_project(G, H, g, l, u, y_raw, sigma, omega, K, ruiz_iter, n_iter_bwd=25, cotangent=None):
    """The package's projection (and, with ``cotangent``, the vjp of its implicit backward) in float64."""
    eq = pinet.EqualityConstraint(a_mat=jnp.asarray(G)[None], b=jnp.asarray(g)[..., None], method=None, var_b=True)
    ineq = pinet.AffineInequalityConstraint(c_mat=jnp.asarray(H)[None], lb=jnp.asarray(l)[..., None], ub=jnp.asarray(u)[..., None])
    params = pinet.EquilibrationParams(max_iter=ruiz_iter, tol=1e-3, ord=2.0, col_scaling=False, update_mode="Gauss", safeguard=False)
    proj = pinet.Project(eq_constraint=eq, ineq_constraint=ineq, unroll=False, equilibration_params=params)
    spec = pinet.EqualityConstraintsSpecification(b=jnp.asarray(g)[..., None])

    def run(x):
        inp = pinet.ProjectionInstance(x=x[..., None], eq=spec)
        out, _ = proj.call(y_raw=inp, sigma=sigma, omega=omega, n_iter=K, n_iter_bwd=n_iter_bwd, fpi=False)
        return out.x[..., 0]

    y = np.asarray(run(jnp.asarray(y_raw)))
    if cotangent is None:
        return y, None
    _, vjp = jax.vjp(run, jnp.asarray(y_raw))
    return y, np.asarray(vjp(jnp.asarray(cotangent))[0])


def ours(G, H, g, l, u, y_raw, sigma, omega, K, ruiz_iter, n_iter_bwd=25, cotangent=None):
    layer = DouglasRachfordProjection(G, H, ruiz=RuizSettings(max_iter=ruiz_iter), sigma=sigma, omega=omega, n_iter_bwd=n_iter_bwd)
    yr = torch.tensor(y_raw, requires_grad=cotangent is not None)
    y, _ = layer(yr, torch.tensor(g), torch.tensor(u), l=torch.tensor(l), n_iter=K)
    if cotangent is None:
        return y.detach().numpy(), None
    (y * torch.tensor(cotangent)).sum().backward()
    return y.detach().numpy(), yr.grad.numpy()


@pytest.mark.parametrize("seed, two_sided, ruiz_iter", [(0, False, 0), (1, True, 0), (2, True, 25), (3, False, 25)])
def test_same_projection_as_pinet_on_random_instances(seed, two_sided, ruiz_iter):
    G, H, g, l, u, y_raw = random_instance(seed, n=12, m_eq=4, m=7, batch=6, two_sided=two_sided)
    for K in (1, 60):
        ref, _ = pinet_project(G, H, g, l, u, y_raw, 0.3, 1.7, K, ruiz_iter)
        got, _ = ours(G, H, g, l, u, y_raw, 0.3, 1.7, K, ruiz_iter)
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-11 * max(1.0, np.abs(ref).max()), err_msg=f"K={K}")


def test_same_projection_and_implicit_gradient_as_pinet_with_its_dc3_settings():
    """Pinet's published DC3 settings (sigma 0.0681, omega 1.7, 50 iterations, 25 Ruiz rounds, BiCGSTAB with 25
    backward iterations) on DC3's data."""
    G, H, g, l, u, y_raw = dc3_instance()
    w = np.random.default_rng(1).normal(size=y_raw.shape)
    ref, ref_grad = pinet_project(G, H, g, l, u, y_raw, 0.06806787572155291, 1.7, 50, 25, cotangent=w)
    got, got_grad = ours(G, H, g, l, u, y_raw, 0.06806787572155291, 1.7, 50, 25, cotangent=w)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-11)
    # BiCGSTAB stops at the same relative residual (1e-5) in both; the iterates agree to rounding
    np.testing.assert_allclose(got_grad, ref_grad, rtol=1e-8, atol=1e-10)
