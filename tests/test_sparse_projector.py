"""The equality projector's sparse factorisation (one LU of G G', no dense SVD) against the dense SVD.

Both are the orthogonal projection onto ``{y : G y = B_eq x}``, so their outputs must agree to rounding on every
case where both apply; where G has dependent rows the sparse one does not apply and the SVD is used, with a
warning. The fused inference path runs on the sparse projector as on the dense one.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from hardlinear.constraints.family import InputBox, JointlyLinearFamily
from hardlinear.layers import equality
from hardlinear.layers.equality import EqualityProjector
from hardlinear.problems.dcopf import DCOPF
from hardlinear.rules.sparse_elimination import eliminate

CASES = [
    ("pglib_opf_case14_ieee", None),
    ("pglib_opf_case30_ieee", None),
    ("pglib_opf_case57_ieee", None),
    ("pglib_opf_case118_ieee", None),
    pytest.param("pglib_opf_case200_activ", None, marks=pytest.mark.slow),
    pytest.param("pglib_opf_case300_ieee", 0.1, marks=pytest.mark.slow),
]


def _batch(family, problem, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    xi = problem.sample(16, generator=g).double() if problem is not None else 2 * torch.rand(16, family.k, generator=g, dtype=torch.float64) - 1
    y = 100.0 * torch.randn(16, family.n, generator=g, dtype=torch.float64)
    return xi, y


def _eq_residual(family, xi: torch.Tensor, y: torch.Tensor) -> float:
    x = np.hstack([np.ones((xi.shape[0], 1)), xi.numpy()])
    r = family.G @ y.numpy().T - family.B_eq @ x.T
    scale = 1.0 + float(abs(family.G).sum(axis=1).max()) * float(np.abs(y.numpy()).max())
    return float(np.abs(r).max() / scale)


@pytest.mark.parametrize("form", ["standard", "inequality"])
@pytest.mark.parametrize(("case", "level"), CASES)
def test_sparse_projector_equals_svd(case: str, level: float | None, form: str) -> None:
    problem = DCOPF(case, uncertainty=level, form=form)
    family = problem.family
    svd = EqualityProjector(family, form="null", factorisation="svd")
    lu = EqualityProjector(family, factorisation="sparse")
    assert (lu.factorisation, lu.form, lu.rank) == ("sparse", "null", svd.rank)
    xi, y = _batch(family, problem)
    a, b = svd(xi, y), lu(xi, y)
    assert float((a - b).abs().max() / (1.0 + a.abs().max())) < 1e-11
    assert _eq_residual(family, xi, b) < 1e-13
    # a projection: applying it twice changes nothing
    assert float((lu(xi, b) - b).abs().max() / (1.0 + b.abs().max())) < 1e-12
    # the affine parametrisation (APM/EAPM) holds the same set: N orthonormal, N' c = 0
    N, c = lu.affine_parametrisation(xi, y)
    assert torch.allclose(N.T @ N, torch.eye(N.shape[1], dtype=N.dtype), atol=1e-12)
    assert float((c @ N).abs().max()) < 1e-9 * (1.0 + float(c.abs().max()))


def _dependent_family() -> JointlyLinearFamily:
    """Random sparse G (6 x 10) with a seventh row = row 0 + row 1 (and its right-hand side likewise)."""
    rng = np.random.default_rng(3)
    G = sp.random(6, 10, density=0.5, random_state=4, format="csr") + sp.eye(6, 10, format="csr")
    G = sp.vstack([G, G[0] + G[1]], format="csr")
    B = rng.standard_normal((6, 3))
    B_eq = np.vstack([B, B[0] + B[1]])
    H = sp.eye(10, format="csr")
    return JointlyLinearFamily(box=InputBox.symmetric(2), G=G, B_eq=B_eq, H=H, B_ineq=np.ones((10, 3)))


def test_dependent_rows_fall_back_to_svd_with_a_warning() -> None:
    family = _dependent_family()
    assert eliminate(family.G) is None  # G G' is singular
    svd = EqualityProjector(family, factorisation="svd")
    with pytest.warns(UserWarning, match="sparse factorisation does not apply"):
        fallback = EqualityProjector(family, factorisation="sparse")
    assert fallback.factorisation == "svd" and fallback.rank == 6
    xi, y = _batch(family, None)
    assert torch.allclose(fallback(xi, y), svd(xi, y), rtol=0, atol=1e-10)
    assert _eq_residual(family, xi, fallback(xi, y)) < 1e-12


def test_auto_picks_sparse_above_the_threshold(monkeypatch) -> None:
    family = DCOPF("pglib_opf_case30_ieee").family
    assert EqualityProjector(family).factorisation == "svd"  # the paper's sizes keep the SVD
    monkeypatch.setattr(equality, "SPARSE_MIN_N", family.n - 1)
    assert EqualityProjector(family).factorisation == "sparse"
    assert EqualityProjector(family, form="row").factorisation == "svd"  # the row form needs the SVD's row basis
    with pytest.raises(ValueError, match="null form"):
        EqualityProjector(family, form="row", factorisation="sparse")
    with pytest.raises(ValueError, match="factorisation must be one of"):
        EqualityProjector(family, factorisation="qr")


def test_fused_path_on_the_sparse_projector(monkeypatch, tmp_path) -> None:
    """The fused module built on a sparse projector: same outputs as the unfused layer and as the SVD's."""
    from tests.test_fused import both, inputs, make_method, rel_diff

    problem = DCOPF("pglib_opf_case57_ieee")
    dense = make_method(problem, str(tmp_path), sigma=3.0)
    monkeypatch.setattr(equality, "SPARSE_MIN_N", 0)
    method = make_method(problem, str(tmp_path), sigma=3.0)
    assert method.layer.projector.factorisation == "sparse"
    assert dense.layer.projector.factorisation == "svd"
    xi = inputs(problem)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback to the unfused layer
        fused, plain = both(method, xi)
        ref = dense.predict(xi)
    assert method.fused_module().d == dense.fused_module().d
    assert float(rel_diff(fused.y, plain.y).max()) < 1e-12
    assert float(rel_diff(fused.y, ref.y).max()) < 1e-10
    alpha = fused.extras["alpha"]
    assert bool((alpha > 0).any()) and bool((alpha == 0).any())  # both branches of the blend are exercised


def test_particular_matrix_is_the_same_in_both_factorisations() -> None:
    family = DCOPF("pglib_opf_case30_ieee").family  # inputs=all_buses: buses without load give zero columns
    svd, lu = EqualityProjector(family, factorisation="svd"), EqualityProjector(family, factorisation="sparse")
    P_svd, P_lu = svd.particular_matrix(), lu.particular_matrix()
    assert P_lu.shape == (family.n, family.k + 1)
    np.testing.assert_allclose(P_lu, P_svd, rtol=0, atol=1e-11 * (1.0 + np.abs(P_svd).max()))
    assert 0 < lu.active.numel() < family.k  # only the loaded buses' columns are kept


def test_rule_skips_zero_columns_of_a_large_rule(monkeypatch, tmp_path) -> None:
    """Above SPARSE_COLUMNS_MIN_SIZE the rule multiplies only its nonzero input columns: same outputs, and the
    cached columns follow in-place changes of the weights."""
    from hardlinear.rules import decision_rule
    from hardlinear.rules.decision_rule import solve_decision_rule

    problem = DCOPF("pglib_opf_case30_ieee")
    rule = solve_decision_rule(problem, cache_dir=tmp_path)
    xi = problem.sample(32, generator=torch.Generator().manual_seed(1)).double()
    full = rule(xi)
    assert rule._sparse_columns(torch.float64) is None  # small: the full product, as recorded
    monkeypatch.setattr(decision_rule, "SPARSE_COLUMNS_MIN_SIZE", 0)
    active, _, _ = rule._sparse_columns(torch.float64)
    assert 0 < active.numel() < problem.k
    assert float((rule(xi) - full).abs().max()) <= 1e-12 * (1.0 + float(full.abs().max()))
    with torch.no_grad():
        rule.linear[:, 1 + int(active[0])] *= 2.0  # in place: the cache must notice
    x = torch.cat([torch.ones(len(xi), 1, dtype=xi.dtype), xi], 1)
    assert torch.allclose(rule(xi), x @ rule.linear.T, rtol=0, atol=1e-12 * (1.0 + float(full.abs().max())))


def test_ill_conditioned_rows_are_refined_not_rejected() -> None:
    """Rows scaled over 4 decades: the sparse factorisation still applies and matches the SVD's. (The case that
    needed the refinement step in ``min_norm`` is case6470_rte's standard form, 51,140 rows: residual 1.7e-8
    plain, 1.3e-13 refined; too large for the default suite.)"""
    rng = np.random.default_rng(5)
    m, n, k = 40, 55, 3
    G = (sp.random(m, n, density=0.15, random_state=6, format="csr") + sp.eye(m, n, format="csr"))
    G = sp.diags(np.logspace(0, -4, m)) @ G
    family = JointlyLinearFamily(
        box=InputBox.symmetric(k), G=G, B_eq=G @ rng.standard_normal((n, k + 1)), H=sp.eye(n, format="csr"),
        B_ineq=np.ones((n, k + 1)),
    )
    elim = eliminate(family.G)
    assert elim is not None
    P = elim.min_norm(family.B_eq)
    assert elim.residual(P, family.B_eq) < 1e-12
    xi, y = _batch(family, None)
    a = EqualityProjector(family, factorisation="svd")(xi, y)
    b = EqualityProjector(family, factorisation="sparse")(xi, y)
    assert float((a - b).abs().max() / (1.0 + a.abs().max())) < 1e-9


def test_few_rows_in_many_columns_keep_the_row_form(monkeypatch) -> None:
    """One balance row over many columns (the dispatch's inequality form): the row form's one-column basis by a thin
    SVD, not the null form's n x (n - 1) basis; the projection is the same as the null form's."""
    rng = np.random.default_rng(5)
    n, k = 400, 3
    G = sp.csr_matrix(np.r_[np.ones(n // 2), np.zeros(n // 2)][None])
    family = JointlyLinearFamily(box=InputBox.symmetric(k), G=G, B_eq=rng.standard_normal((1, k + 1)),
                                 H=sp.eye(n, format="csr"), B_ineq=np.ones((n, k + 1)))
    monkeypatch.setattr(equality, "SPARSE_MIN_N", n - 1)  # above the sparse threshold: the row form still wins
    auto = EqualityProjector(family)
    assert (auto.factorisation, auto.form, auto.rank) == ("svd", "row", 1)
    assert auto.consts._buffers["basis"].shape == (n, 1)
    null = EqualityProjector(family, form="null", factorisation="sparse")
    xi, y = _batch(family, None)
    a, b = auto(xi, y), null(xi, y)
    assert float((a - b).abs().max() / (1.0 + b.abs().max())) < 1e-12
    assert _eq_residual(family, xi, a) < 1e-13
    monkeypatch.setattr(equality, "ROW_FORM_MAX_ROWS", 0)  # more rows than the row form takes: the sparse null form
    assert EqualityProjector(family).factorisation == "sparse"
