"""Rows that repeat up to sign, stored once.

Why: two-sided limits ``lo <= a'y <= hi`` enter a constraint family as the two rows ``a'y <= hi`` and
``-a'y <= -lo``. On PGLearn's dispatch every line's PTDF row is stored twice that way, in ``H`` and in ``h(x)``'s
input part; a product with the rows taken once, then read back with their signs, does half the work. The
sign is exact in floating point (``fl(-a'y) = -fl(a'y)``), so the values are those of the same sum.
"""

from __future__ import annotations

import hashlib

import numpy as np
import scipy.sparse as sp
import torch


def signed_unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``rows: (r, c) -> (unique (u, c), index (r,), sign (r,))`` with ``rows[i] == sign[i] * unique[index[i]]``
    exactly; each row's sign makes its first nonzero positive (an all-zero row keeps sign 1).

    Rows are grouped by a hash of their canonical bytes and compared exactly within a group, one row at a time, so
    no sorted copy of the matrix is made (the dispatch's ``h(x)`` block is a gigabyte at case9241).
    """
    rows = np.asarray(rows, dtype=np.float64)
    r = rows.shape[0]
    index, sign = np.empty(r, dtype=np.int64), np.ones(r)
    groups: dict[bytes, list[int]] = {}
    kept: list[np.ndarray] = []
    for i in range(r):
        row = rows[i]
        nonzero = np.flatnonzero(row)
        s = -1.0 if nonzero.size and row[nonzero[0]] < 0 else 1.0
        canonical = s * row + 0.0  # + 0.0 turns -0.0 into 0.0, so equal rows have equal bytes
        key = hashlib.blake2b(canonical.tobytes(), digest_size=16).digest()
        for j in groups.setdefault(key, []):
            if np.array_equal(kept[j], canonical):
                index[i] = j
                break
        else:
            groups[key].append(len(kept))
            index[i] = len(kept)
            kept.append(canonical)
        sign[i] = s
    unique = np.vstack(kept) if kept else np.zeros((0, rows.shape[1]))
    return unique, index, sign


def compact_affine(B: np.ndarray) -> dict[str, np.ndarray]:
    """An affine map ``h(x) = B (1, xi)`` kept as ``b0`` (``B``'s constant column) plus, on the rows that read the
    inputs (``rows``), those rows once up to sign: ``U_T`` (``k, u``), ``index`` and ``sign`` per such row
    (:func:`compact_affine_times`). Why: on PGLearn's dispatch a third of ``h``'s rows are constant and the rest
    are the lines' PTDF rows twice, so the product does a third of the dense one's work with a third of its
    matrix (0.8 GB dense at case6470)."""
    B = np.asarray(B, dtype=np.float64)
    inputs = B[:, 1:]
    rows = np.flatnonzero(np.any(inputs != 0, axis=1))
    unique, index, sign = signed_unique_rows(inputs[rows])
    return {"b0": B[:, 0], "U_T": unique.T, "sign": sign, "rows": rows, "index": index}


def compact_affine_times(xi: torch.Tensor, b0: torch.Tensor, U_T: torch.Tensor, sign: torch.Tensor,
                         rows: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``xi: (B, k) -> h(x): (B, m)`` from :func:`compact_affine`'s arrays as tensors (``rows``, ``index`` long)."""
    reads = (xi @ U_T).index_select(1, index) * sign
    return b0.expand(xi.shape[0], -1).index_add(1, rows, reads)


def split_long_columns(H: sp.spmatrix, long_above: int, floats_per_nonzero: float) -> dict | None:
    """``H``'s columns with more than ``long_above`` entries as a dense block over the rows they touch, each row once
    up to sign (:func:`signed_unique_rows`), and the other columns as ``rest`` (``H`` with the long columns zeroed);
    None when there are none, or when the block would hold more than ``floats_per_nonzero`` floats per nonzero it
    stores (a sparse product is then no dearer). Why: on PGLearn's dispatch the generators' columns are full (each
    line's PTDF row, twice) and the slacks' columns hold one entry a row; BLAS multiplies the first tenfold faster
    than a sparse product does. Keys: ``block_T`` (long columns x unique rows), ``sign``, ``index`` (per touched row),
    ``rows`` (the touched rows), ``cols`` (the long columns), ``rest``."""
    H = sp.csr_matrix(H)
    col_nnz = np.diff(H.tocsc().indptr)
    cols = np.flatnonzero(col_nnz > long_above)
    if not cols.size:
        return None
    long = H[:, cols].tocsr()
    rows = np.flatnonzero(np.diff(long.indptr))
    if rows.size * cols.size > floats_per_nonzero * long.nnz:
        return None
    unique, index, sign = signed_unique_rows(long[rows].toarray())
    keep = np.ones(H.shape[1], dtype=bool)
    keep[cols] = False
    rest = (H @ sp.diags(keep.astype(np.float64))).tocsr()
    rest.eliminate_zeros()
    return {"block_T": unique.T, "sign": sign, "index": index, "rows": rows, "cols": cols, "rest": rest}


def split_times(y: torch.Tensor, rest: torch.Tensor, block_T: torch.Tensor, sign: torch.Tensor, index: torch.Tensor,
                rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """``y: (B, n) -> H y: (B, m)`` from :func:`split_long_columns`'s parts as tensors (``rest`` sparse, the index
    arrays long); differentiable in ``y``."""
    block = (y.index_select(1, cols) @ block_T).index_select(1, index) * sign
    return torch.sparse.mm(rest, y.T).T.index_add(1, rows, block)
