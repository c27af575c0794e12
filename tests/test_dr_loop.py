"""The fused Douglas-Rachford loop (layers/dr_loop.py) against the iteration written out from its math, step by
step: Pinet's projection against its module's own reference step (``_step``), ``refine=dr`` against the naive
null-space iteration (issue 28's form). Outputs to 1e-12 relative, with and without a gradient, and the unrolled
gradients too; iteration counts where snapshots are taken; the dense and the two-product projections."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hardlinear.layers.douglas_rachford import DouglasRachfordProjection, RuizSettings
from hardlinear.layers.dr_loop import AffineProjection, ProxData, iterate
from hardlinear.layers.refine import DouglasRachford
from hardlinear.problems import build_problem

RTOL = 1e-12


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


def pinet_reference(layer: DouglasRachfordProjection, y_raw, g, u, l, n_iter: int) -> torch.Tensor:
    """The module's reference step, looped in Python: what the fused loop replaced."""
    q, s_lo, s_hi = layer._data(y_raw, g, u, l)
    s = y_raw.new_zeros(y_raw.shape[0], layer.n + layer.m)
    for _ in range(n_iter):
        s = layer._step(s, y_raw, q, s_lo, s_hi)
    (d,) = layer.consts.get(("d",), y_raw)
    return d * layer._project_eq(s, q)[:, : layer.n]


def random_pinet(seed: int, box: bool, ruiz: int):
    rng = np.random.default_rng(seed)
    n, m_eq, m, B = 12, 4, 9, 7
    G, H = rng.normal(size=(m_eq, n)), rng.normal(size=(m, n))
    lo, hi = (-np.ones(n) * 2, np.ones(n) * 2) if box else (None, None)
    layer = DouglasRachfordProjection(G, H, lo=lo, hi=hi, ruiz=RuizSettings(max_iter=ruiz), sigma=0.4, omega=1.6,
                                      backward="unrolled")
    g = torch.tensor(rng.uniform(-1, 1, size=(B, m_eq)))
    u = torch.tensor(rng.uniform(0.5, 2, size=(B, m)))
    l = -torch.tensor(rng.uniform(0.5, 2, size=(B, m)))
    return layer, torch.tensor(3 * rng.normal(size=(B, n))), g, u, l


@pytest.mark.parametrize("seed, box, ruiz", [(0, False, 0), (1, True, 0), (2, True, 25)])
@pytest.mark.parametrize("n_iter", [1, 7, 120])
def test_pinet_loop_equals_reference_step(seed, box, ruiz, n_iter):
    layer, y_raw, g, u, l = random_pinet(seed, box, ruiz)
    with torch.no_grad():
        got, _ = layer(y_raw, g, u, l=l, n_iter=n_iter)
        ref = pinet_reference(layer, y_raw, g, u, l, n_iter)
    assert rel(got, ref) <= RTOL
    # unrolled: the gradient through the fused out-of-place loop equals the reference's
    w = torch.randn_like(y_raw)
    ya = y_raw.clone().requires_grad_(True)
    (layer(ya, g, u, l=l, n_iter=n_iter)[0] * w).sum().backward()
    yb = y_raw.clone().requires_grad_(True)
    (pinet_reference(layer, yb, g, u, l, n_iter) * w).sum().backward()
    assert rel(ya.grad, yb.grad) <= 1e-11


def naive_refine(module: DouglasRachford, xi: torch.Tensor, y: torch.Tensor, steps: int) -> torch.Tensor:
    """``refine=dr``'s iteration as its docstring writes it (separate u- and t-parts, the projector applied as
    ``K (a + Ms' b)``), from the module's basis and rows."""
    red = module.reduced
    c = red.particular(xi, y)
    (N,) = red.consts.get(("N",), y)
    M = red.consts.get(("M",), y)[0]
    norms = M.norm(dim=1)
    Ms = M / torch.where(norms > 0, norms, 1.0)[:, None]
    K = torch.linalg.inv(torch.eye(Ms.shape[1], dtype=y.dtype) + Ms.T @ Ms)
    bound = red.slack(xi, c) / torch.where(norms > 0, norms, 1.0)
    bound = bound - module.margin * (1.0 + bound.abs())
    sig, om = module.sigma, module.omega
    u_raw = (y - c) @ N
    wu, wt = u_raw, u_raw @ Ms.T
    for _ in range(steps):
        zu = (wu + wt @ Ms) @ K
        zt = zu @ Ms.T
        pu = (2 * sig * u_raw + (2 * zu - wu)) / (1 + 2 * sig)
        pt = torch.minimum(2 * zt - wt, bound)
        wu, wt = wu + om * (pu - zu), wt + om * (pt - zt)
    return c + ((wu + wt @ Ms) @ K) @ N.T


@pytest.mark.parametrize("name, dense", [("dc3_qp", True), ("dcopf_14", False)])
def test_refine_loop_equals_naive_iteration(name, dense):
    problem = build_problem(name)
    module = DouglasRachford(problem.family, steps=9, eval_steps=40, sigma=0.3)
    assert module.dense is dense  # both projections are exercised
    gen = torch.Generator().manual_seed(3)
    xi = problem.sample(16, generator=gen)
    y = 4 * torch.randn(16, problem.n, dtype=torch.float64, generator=gen)
    module.eval()
    with torch.no_grad():
        snaps = module.snapshots(xi, y)
    assert len(snaps) == 2  # the training count, then the inference count
    for got, steps in zip(snaps, (9, 40)):
        assert rel(got, naive_refine(module, xi, y, steps)) <= RTOL, steps
    module.train()
    w = torch.randn_like(y)
    ya, yb = y.clone().requires_grad_(True), y.clone().requires_grad_(True)
    (module(xi, ya) * w).sum().backward()
    (naive_refine(module, xi, yb, 9) * w).sum().backward()
    assert rel(ya.grad, yb.grad) <= 1e-11


def test_iterate_leaves_its_start_untouched_and_rejects_mixed_projections():
    s = torch.randn(3, 4, dtype=torch.float64)
    start = s.clone()
    P = torch.eye(4, dtype=torch.float64) * 0.5
    prox = ProxData(torch.ones(4, dtype=torch.float64), torch.zeros(3, 4, dtype=torch.float64),
                    torch.full((4,), -1.0, dtype=torch.float64), torch.full((4,), 1.0, dtype=torch.float64))
    with torch.no_grad():
        out = iterate(s, AffineProjection(P=P), prox, 1.0, [2, 5])
    assert torch.equal(s, start) and len(out) == 2 and not torch.equal(out[0], out[1])
    with pytest.raises(ValueError, match="either dense"):
        AffineProjection(P=P, K=P, M_T=P)
