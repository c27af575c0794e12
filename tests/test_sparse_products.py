"""``H @ F`` with H's full columns through BLAS (hardlinear.rules.sparse_products): scipy's values, to rounding."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import hardlinear.rules.sparse_products as products


@pytest.mark.parametrize("shape_of_F", ["matrix", "vector"])
def test_the_product_is_scipys_with_full_columns_dense_and_the_rest_sparse(monkeypatch, shape_of_F):
    rng = np.random.default_rng(0)
    rows, full, thin = 300, 40, 500
    H = sp.hstack([sp.csr_matrix(rng.normal(size=(rows, full))), sp.random(rows, thin, density=0.01, random_state=1)]).tocsr()
    F = rng.normal(size=(full + thin, 7) if shape_of_F == "matrix" else full + thin)
    monkeypatch.setattr(products, "MIN_WORK", 0)
    split, setdiff = [], np.setdiff1d  # the dense block's columns, seen where the rest is computed from them

    def spy(all_columns, dense):
        split.append(dense.tolist())
        return setdiff(all_columns, dense)

    monkeypatch.setattr(products.np, "setdiff1d", spy)
    got = products.sparse_times_dense(H, F)
    want = np.asarray(H @ F)
    assert split == [list(range(full))]  # exactly the full columns went through BLAS
    assert got.shape == want.shape and np.abs(got - want).max() <= 1e-13 * np.abs(want).max()


def test_small_products_and_matrices_without_full_columns_are_scipys_own():
    rng = np.random.default_rng(2)
    F = rng.normal(size=(50, 3))
    for H in (sp.csr_matrix(rng.normal(size=(20, 50))), sp.random(2000, 50, density=0.05, random_state=3).tocsr()):
        assert np.array_equal(products.sparse_times_dense(H, F), np.asarray(H @ F))
