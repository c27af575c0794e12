"""Rows kept once up to sign (hardlinear.constraints.signed_rows): exact reconstruction, and the compact affine map's values."""

from __future__ import annotations

import numpy as np
import torch

from hardlinear.constraints.family import lift
from hardlinear.constraints.signed_rows import compact_affine, compact_affine_times, signed_unique_rows


def test_each_row_is_its_sign_times_a_kept_row_and_negated_rows_share_one():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(5, 7))
    base[1, :3] = 0.0  # a first nonzero further in
    base[0, 4] = 0.0
    rows = np.vstack([base, -base[[0, 2]], base[[3]], np.zeros((1, 7)), -np.zeros((1, 7)), -base[[1]]])
    rows[0, 4] = -0.0  # -0.0 and 0.0 are the same entry
    unique, index, sign = signed_unique_rows(rows)
    assert unique.shape == (6, 7)  # five rows and the zero row
    assert np.array_equal(sign[:, None] * unique[index], rows)
    assert index[5] == index[0] and index[6] == index[2] and index[7] == index[3] and index[8] == index[9]
    assert index[10] == index[1] and sign[10] == -sign[1] and sign[8] == sign[9] == 1.0
    assert all(unique[j][np.flatnonzero(unique[j])[0]] > 0 for j in range(6) if unique[j].any())


def test_rows_that_differ_in_one_bit_stay_apart():
    row = np.linspace(-1.0, 1.0, 9)
    unique, index, _ = signed_unique_rows(np.vstack([row, np.nextafter(row, 2.0)]))
    assert unique.shape[0] == 2 and index.tolist() == [0, 1]


def test_the_compact_affine_map_gives_the_dense_product_in_both_dtypes():
    rng = np.random.default_rng(1)
    k, D = 4, rng.normal(size=(6, 4))
    B = np.vstack([np.c_[rng.normal(size=6), D], np.c_[rng.normal(size=6), -D], np.c_[rng.normal(size=3), np.zeros((3, k))]])
    arrays = compact_affine(B)
    assert arrays["U_T"].shape == (k, 6) and arrays["rows"].tolist() == list(range(12))
    for dtype, tol in ((torch.float64, 1e-14), (torch.float32, 1e-5)):
        xi = torch.rand(9, k, dtype=dtype) * 2 - 1
        t = {n: torch.as_tensor(v, dtype=torch.long if n in ("rows", "index") else dtype) for n, v in arrays.items()}
        got = compact_affine_times(xi, t["b0"], t["U_T"], t["sign"], t["rows"], t["index"])
        want = lift(xi.double()) @ torch.as_tensor(B).T
        assert got.dtype == dtype and torch.allclose(got.double(), want, rtol=0, atol=tol)
