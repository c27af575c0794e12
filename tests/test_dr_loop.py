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
    live = (module.consts.row_scale > 0).to(y.dtype)  # the module's zero rows (test_zero_rows_... checks them)
    Ms = M * (live / torch.where(norms > 0, norms, 1.0))[:, None]
    K = torch.linalg.inv(torch.eye(Ms.shape[1], dtype=y.dtype) + Ms.T @ Ms)
    bound = red.slack(xi, c) * live / torch.where(norms > 0, norms, 1.0)
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


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (make gpu-check; CI has none)")
def test_cuda_graph_replay_equals_the_cpu_loop_on_fresh_inputs():
    """The captured graph is replayed with each call's data: two calls with other inputs (same shape) must give
    what the CPU loop gives, for Pinet's projection and for refine=dr's module."""
    layer, y_raw, g, u, l = random_pinet(1, True, 0)
    gpu = random_pinet(1, True, 0)[0].cuda()
    problem = build_problem("dc3_qp")
    module = DouglasRachford(problem.family, steps=9, eval_steps=30, sigma=0.3).eval()
    module_gpu = DouglasRachford(problem.family, steps=9, eval_steps=30, sigma=0.3).eval().cuda()
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        y = 3 * torch.randn(y_raw.shape, dtype=torch.float64, generator=gen)
        with torch.no_grad():
            ref, _ = layer(y, g, u, l=l, n_iter=40)
            got, _ = gpu(y.cuda(), g.cuda(), u.cuda(), l=l.cuda(), n_iter=40)
        assert rel(got.cpu(), ref) <= RTOL, seed
        xi = problem.sample(5, generator=gen)
        yq = 4 * torch.randn(5, problem.n, dtype=torch.float64, generator=gen)
        with torch.no_grad():
            ref_snaps = module.snapshots(xi, yq)
            got_snaps = module_gpu.snapshots(xi.cuda(), yq.cuda())
        assert all(rel(a.cpu(), b) <= RTOL for a, b in zip(got_snaps, ref_snaps)), seed
    assert len(gpu._graphs) == 1 and len(module_gpu._graphs) == 1  # one capture each, replayed


def test_the_gpu_loop_in_three_kernels_equals_the_dense_loop():
    """``_wide_loop`` (the CUDA graph's body for a dense projector) computes the same iterates as ``_dense_loop``:
    checked on the CPU, where CI can run it."""
    from hardlinear.layers import dr_loop

    layer, y_raw, g, u, l = random_pinet(2, True, 25)
    (P,) = layer.consts.get(("P",), y_raw)
    q, s_lo, s_hi = layer._data(y_raw, g, u, l)
    prox = layer._prox(y_raw, s_lo, s_hi)
    for q_used in (q, None):
        s1, s2 = torch.randn(y_raw.shape[0], P.shape[0], dtype=torch.float64), None
        s2 = s1.clone()
        dr_loop._dense_loop(s1, P, q_used, prox.C, prox.C2, prox.e, prox.lo, prox.hi, True, 60, 1.6)
        dr_loop._wide_loop(s2, P, q_used, prox.C, prox.C2, prox.e, prox.lo, prox.hi, True, 60, 1.6)
        assert rel(s2, s1) <= RTOL


def test_rows_that_are_rounding_are_zero_rows():
    """A row of H orthogonal to null(G) has M = H N of size ~1e-16 |H_i|, a different one on every BLAS: scaled to
    unit norm it became a direction and moved refined outputs by 0.1 between machines. dcopf_14 has four."""
    from hardlinear.layers.equality import constant_lhs
    from hardlinear.layers.refine import ZERO_ROW_RTOL

    problem = build_problem("dcopf_14")
    module = DouglasRachford(problem.family, steps=5)
    M = module.reduced.consts.M.numpy()
    ratio = np.linalg.norm(M, axis=1) / np.linalg.norm(constant_lhs(problem.family, "H"), axis=1)
    rounding = ratio <= ZERO_ROW_RTOL
    assert rounding.sum() == 4 and ratio[rounding].max() < 1e-14 and ratio[~rounding].min() > 1e-6
    scale = module.consts.row_scale.numpy()
    assert np.all(scale[rounding] == 0) and np.all(scale[~rounding] > 0)
    assert scale.max() < 1e6  # no row blown up to unit length from rounding


def test_the_dense_projector_path_where_a_factor_saves_nothing():
    """Few constraints (``2 r >= L``): no factor is kept and the dense loop runs; it still equals the reference."""
    rng = np.random.default_rng(5)
    G, H = rng.normal(size=(1, 12)), rng.normal(size=(2, 12))
    layer = DouglasRachfordProjection(G, H, sigma=0.5, omega=1.5)
    assert not layer.factored
    y_raw, g = torch.tensor(rng.normal(size=(4, 12))), torch.tensor(rng.normal(size=(4, 1)))
    u = torch.tensor(rng.uniform(0.1, 1, size=(4, 2)))
    with torch.no_grad():
        got, _ = layer(y_raw, g, u, n_iter=30)
        assert rel(got, pinet_reference(layer, y_raw, g, u, None, 30)) <= RTOL
