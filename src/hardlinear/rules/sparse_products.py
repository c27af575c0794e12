"""``H @ F`` for a sparse ``H`` whose long columns are dense enough, and a dense ``F`` of many columns.

Why: scipy multiplies a sparse matrix by a dense one entry by entry, several times slower per multiply-add than
BLAS's matrix product. A decision rule's verification forms ``H F`` over every row (``F``: ``n x (k + 1)``); on
PGLearn's dispatch ``H``'s line rows are PTDF rows over every generator, 46 M nonzeros at case9241 against ``k + 1 =
4,896`` columns of ``F``, and scipy's product took minutes a pass. Here the columns of ``H`` with at least
``DENSE_FRACTION`` of their entries nonzero go through BLAS as a dense block, the rest through scipy. The sums are
the same float64 sums in another order (the verifications that use this bound their rounding apart).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

DENSE_FRACTION = 0.25
"""A column of ``H`` at least this full goes into the dense block."""
MIN_WORK = 10**8
"""Below this many multiply-adds (``nnz(H)`` times the columns of ``F``) scipy's product is kept as it is."""


def sparse_times_dense(H: sp.spmatrix, F: np.ndarray) -> np.ndarray:
    """``H @ F`` as a dense array ``(rows of H, columns of F)``."""
    H = sp.csr_matrix(H)
    F = np.asarray(F)
    columns = F.shape[1] if F.ndim == 2 else 1
    if H.nnz * columns < MIN_WORK or H.shape[0] == 0:
        return np.asarray(H @ F)
    fill = np.diff(H.tocsc().indptr) / H.shape[0]
    dense = np.flatnonzero(fill >= DENSE_FRACTION)
    if dense.size == 0:
        return np.asarray(H @ F)
    rest = np.setdiff1d(np.arange(H.shape[1]), dense)
    out = H[:, dense].toarray() @ F[dense]
    if rest.size:
        out += np.asarray(H[:, rest] @ F[rest])
    return out
