"""Training's projection by a sparse Cholesky of G G' (layers/normal_projection.py) against the orthonormal basis.

Both are the orthogonal projection onto null(G) plus the same particular point, so outputs and gradients agree to
rounding; only inputs that need a gradient, on CPU, in float64, take the Cholesky path, so what is reported (no
gradient) is the basis's, bit for bit.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from hardlinear.layers.equality import EqualityProjector
from hardlinear.layers.normal_projection import NormalProjection
from hardlinear.problems.dcopf import DCOPF


@pytest.fixture(scope="module")
def case118():
    return DCOPF("pglib_opf_case118_ieee", form="standard").family


def _inputs(family, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    xi = 2 * torch.rand(8, family.k, generator=g, dtype=torch.float64) - 1
    y = 100.0 * torch.randn(8, family.n, generator=g, dtype=torch.float64)
    return xi, y


def _output_and_gradient(projector, xi: torch.Tensor, y: torch.Tensor, weights: torch.Tensor):
    y = y.clone().requires_grad_(True)
    out = projector(xi, y)
    (out * weights).sum().backward()
    return out.detach(), y.grad


def test_training_path_equals_the_basis_in_outputs_and_gradients(case118) -> None:
    cholesky = EqualityProjector(case118, factorisation="sparse")
    basis = EqualityProjector(case118, factorisation="sparse", train_solve="basis")
    assert cholesky.normal_projection is not None and basis.normal_projection is None
    xi, y = _inputs(case118)
    weights = torch.randn(y.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    out_c, grad_c = _output_and_gradient(cholesky, xi, y, weights)
    out_b, grad_b = _output_and_gradient(basis, xi, y, weights)
    assert not torch.equal(out_c, out_b)  # two computations, not one path taken twice
    assert float((out_c - out_b).abs().max() / out_b.abs().max()) < 1e-9
    assert float((grad_c - grad_b).abs().max() / grad_b.abs().max()) < 1e-9
    G = torch.as_tensor(case118.G.toarray())
    assert float((G @ grad_c.T).abs().max()) < 1e-9 * float(weights.abs().max())  # the gradient lies in null(G)


def test_without_a_gradient_the_basis_projects_bit_for_bit(case118) -> None:
    cholesky = EqualityProjector(case118, factorisation="sparse")
    basis = EqualityProjector(case118, factorisation="sparse", train_solve="basis")
    xi, y = _inputs(case118, seed=1)
    assert torch.equal(cholesky(xi, y), basis(xi, y))
    with torch.no_grad():
        assert torch.equal(cholesky(xi, y.clone().requires_grad_(True)), basis(xi, y))
    assert torch.equal(cholesky(xi.float(), y.float().requires_grad_(True)).detach(), basis(xi.float(), y.float()))


def test_the_projection_has_the_right_gradient_and_is_idempotent() -> None:
    rng = np.random.default_rng(0)
    G = sp.random(12, 30, density=0.2, random_state=1, format="csr") + sp.eye(12, 30, format="csr")
    op = NormalProjection(G)
    y = torch.tensor(rng.standard_normal((4, 30)), requires_grad=True)
    assert torch.autograd.gradcheck(op, (y,))
    out = op(y).detach()
    assert float(np.abs(G @ out.numpy().T).max()) < 1e-12
    assert torch.allclose(op(out).detach(), out, rtol=0, atol=1e-12)  # idempotent


def test_copies_rebuild_the_factor(case118) -> None:
    projector = EqualityProjector(case118, factorisation="sparse")
    xi, y = _inputs(case118, seed=2)
    weights = torch.ones_like(y)
    expected = _output_and_gradient(projector, xi, y, weights)
    for twin in (copy.deepcopy(projector), pickle.loads(pickle.dumps(projector))):
        assert twin.normal_projection._solver is None
        for got, want in zip(_output_and_gradient(twin, xi, y, weights), expected, strict=True):
            assert torch.equal(got, want)


def test_a_bad_train_solve_is_refused(case118) -> None:
    with pytest.raises(ValueError, match="train_solve must be one of"):
        EqualityProjector(case118, train_solve="cholmod")


def test_without_cholespy_training_projects_by_the_basis(case118, monkeypatch) -> None:
    from hardlinear.layers import equality

    monkeypatch.setattr(equality, "cholesky_available", lambda: False)
    projector = EqualityProjector(case118, factorisation="sparse")
    assert projector.normal_projection is None
    xi, y = _inputs(case118, seed=4)
    out = projector(xi, y.clone().requires_grad_(True))
    assert torch.equal(out.detach(), projector(xi, y))
