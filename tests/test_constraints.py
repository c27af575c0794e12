"""Constraint families: batched evaluation, the box, the standard form."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from hardlinear.constraints.family import InputBox, InputDependentFamily, JointlyLinearFamily, lift, standard_form


def random_jl(seed=0, n=6, m_eq=2, m_ineq=5, k=3):
    rng = np.random.default_rng(seed)
    return JointlyLinearFamily(
        box=InputBox.symmetric(k),
        G=sp.random(m_eq, n, density=0.6, random_state=seed) + sp.eye(m_eq, n),
        B_eq=rng.normal(size=(m_eq, k + 1)),
        H=sp.random(m_ineq, n, density=0.5, random_state=seed + 1),
        B_ineq=rng.normal(size=(m_ineq, k + 1)),
    )


def test_jointly_linear_residuals_match_numpy():
    fam = random_jl()
    xi = fam.box.sample(7, torch.Generator().manual_seed(0))
    y = torch.randn(7, fam.n, dtype=torch.float64)
    for i in range(7):
        G, g, H, h = fam.instance(xi[i].numpy())
        np.testing.assert_allclose(fam.eq_resid(xi, y)[i].numpy(), G @ y[i].numpy() - g, atol=1e-12)
        np.testing.assert_allclose(fam.ineq_resid(xi, y)[i].numpy(), H @ y[i].numpy() - h, atol=1e-12)


def test_above_the_dense_limit_residuals_and_their_gradients_are_the_dense_ones(monkeypatch):
    """Large families keep G, H sparse (with a transpose made once for the backward pass) and h(x) compact; the
    values and gradients are those of the small path."""
    import hardlinear.constraints.family as constraints

    fam = random_jl(seed=4, n=9, m_eq=3, m_ineq=8, k=4)
    full = np.random.default_rng(5).normal(size=(4, 2))
    fam.H = sp.csr_matrix(np.c_[np.r_[full, -full], fam.H.toarray()[:, 2:]])  # two full columns, rows 4-7 negating 0-3 there
    fam.B_ineq[4:] = fam.B_ineq[:4] * np.r_[1.0, -np.ones(4)]  # rows 4-7: rows 0-3 with their inputs' part negated
    fam.B_ineq[2, 1:] = 0.0  # a row that reads no input
    xi = fam.box.sample(11, torch.Generator().manual_seed(1))
    y0 = torch.randn(11, fam.n, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    weights = torch.randn(11, fam.m_eq + fam.m_ineq, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    results = []
    for limit in (None, 1):
        if limit is not None:
            monkeypatch.setattr(constraints, "DENSE_LIMIT", limit)
            fam._cache.clear()
        y = y0.clone().requires_grad_(True)
        resid = torch.cat([fam.eq_resid(xi, y), fam.ineq_resid(xi, y)], dim=1)
        (resid * weights).sum().backward()
        results.append((resid.detach(), y.grad, fam.ineq_rhs(xi)))
    assert fam._t("H", y0).layout == torch.sparse_csr and ("B_ineq compact", xi.device, xi.dtype) in fam._cache
    rest, block_T, *_, cols = fam._split_H(y0)  # the long columns (the two full ones among them) through BLAS
    assert {0, 1} <= set(cols.tolist()) and block_T.shape[0] == len(cols) and rest.shape == (8, 9)
    for small, large in zip(results[0], results[1], strict=True):
        assert torch.allclose(small, large, rtol=0, atol=1e-13)


def test_input_dependent_residuals_match_numpy():
    rng = np.random.default_rng(1)
    k, n = 2, 4
    fam = InputDependentFamily(
        box=InputBox.symmetric(k), G_stack=rng.normal(size=(k + 1, 1, n)), B_eq=rng.normal(size=(1, k + 1)),
        H_stack=rng.normal(size=(k + 1, 3, n)), B_ineq=rng.normal(size=(3, k + 1)),
    )
    xi = fam.box.sample(5, torch.Generator().manual_seed(1))
    y = torch.randn(5, n, dtype=torch.float64)
    for i in range(5):
        G, g, H, h = fam.instance(xi[i].numpy())
        np.testing.assert_allclose(fam.ineq_resid(xi, y)[i].numpy(), H @ y[i].numpy() - h, atol=1e-12)
        np.testing.assert_allclose(fam.eq_resid(xi, y)[i].numpy(), G @ y[i].numpy() - g, atol=1e-12)
    std = standard_form(fam)
    s = -fam.ineq_resid(xi, y)
    assert std.eq_resid(xi, torch.cat([y, s], 1))[:, 1:].abs().max() < 1e-12


def test_standard_form_of_jointly_linear():
    fam = random_jl(2)
    std = standard_form(fam)
    assert (std.n, std.m_eq, std.m_ineq) == (fam.n + fam.m_ineq, fam.m_eq + fam.m_ineq, fam.m_ineq)
    xi = fam.box.sample(3, torch.Generator().manual_seed(0))
    y = torch.randn(3, fam.n, dtype=torch.float64)
    full = torch.cat([y, -fam.ineq_resid(xi, y)], 1)
    assert std.eq_resid(xi, full)[:, fam.m_eq :].abs().max() < 1e-12
    torch.testing.assert_close(std.eq_resid(xi, full)[:, : fam.m_eq], fam.eq_resid(xi, y))
    torch.testing.assert_close(std.ineq_resid(xi, full), fam.ineq_resid(xi, y))


def test_box_sampling_vertices_and_violation():
    box = InputBox(np.array([-1.0, 0.0]), np.array([1.0, 2.0]))
    xi = box.sample(1000, torch.Generator().manual_seed(0))
    assert xi.min(0).values.tolist() >= [-1.0, 0.0] and xi.max(0).values.tolist() <= [1.0, 2.0]
    v = box.vertices()
    assert v.shape == (4, 2) and set(map(tuple, v.tolist())) == {(-1, 0), (-1, 2), (1, 0), (1, 2)}
    assert box.vertices(limit=2, generator=torch.Generator().manual_seed(0)).shape == (2, 2)
    out = torch.tensor([[0.0, 1.0], [1.5, 1.0], [0.0, -0.25]], dtype=torch.float64)
    torch.testing.assert_close(box.violation(out), torch.tensor([0.0, 0.5, 0.25], dtype=torch.float64))
    assert torch.equal(lift(xi)[:, 0], torch.ones(1000, dtype=torch.float64))


@pytest.mark.parametrize("lo, hi, match", [([0.0], [1.0, 2.0], "differ in length"), ([1.0], [0.0], "lo > hi"), ([0.0], [np.inf], "finite")])
def test_bad_box(lo, hi, match):
    with pytest.raises(ValueError, match=match):
        InputBox(np.array(lo), np.array(hi))


def test_rhs_with_wrong_width_is_rejected():
    with pytest.raises(ValueError, match="k \\+ 1"):
        JointlyLinearFamily(box=InputBox.symmetric(2), G=sp.eye(2), B_eq=np.zeros((2, 2)), H=sp.eye(2), B_ineq=np.zeros((2, 3)))
