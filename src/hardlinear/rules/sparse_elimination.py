"""The equalities ``G y = b`` of a large sparse ``G`` without a dense factorisation: one sparse LU of ``G G'``.

Why: the dense SVD of ``G`` needs ``O(n^2)`` memory and ``O(n^3)`` time (an ``n x n`` ``V``: 3 GB and minutes at
2,000 buses in the standard form). When ``G`` has full row rank, ``G G'`` (``m x m``, about as sparse as the
grid's Laplacian) has a sparse LU, and with it

* the min-norm solution ``G^+ b = G' (G G')^{-1} b`` of any right-hand side, and
* an orthonormal basis ``N: (n, d)`` of ``null(G)``, ``d = n - m``: ``d`` random vectors projected onto the null
  space twice (the second pass removes what the first left at rounding level), then a thin QR.

Memory ``O(nnz(LU) + n d)``. Used by the robust LP (:mod:`hardlinear.rules.reduced.elimination`) and the
equality projection (:mod:`hardlinear.layers.equality`). Returns None where this does not apply (dependent or
badly conditioned rows, ``m >= n``): the caller then needs a rank-revealing (dense) factorisation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

# Relative residuals above these reject the factorisation (the rows are dependent or nearly so).
PARTICULAR_TOL = 1e-8
NULL_TOL = 1e-9
# A basis column whose QR pivot is below this (relative to the largest) means null(G) is wider than n - m.
RANK_TOL = 1e-10


@dataclass
class SparseElimination:
    """``G`` (csr), the LU of ``G G'``, and an orthonormal null-space basis ``N: (n, n - m)``."""

    G: sp.csr_matrix
    lu: Any  # scipy SuperLU of G G'
    N: np.ndarray
    null_residual: float

    def solve_normal(self, b: np.ndarray) -> np.ndarray:
        """``(G G')^{-1} b`` for ``b: (m,)`` or ``(m, r)``."""
        return self.lu.solve(np.ascontiguousarray(b, dtype=np.float64))

    def min_norm(self, B: np.ndarray) -> np.ndarray:
        """``G^+ B = G' (G G')^{-1} B``: ``(m, r) -> (n, r)`` (exact for full row rank), with one step of
        iterative refinement (the normal equations square ``G``'s condition number)."""
        return _refined_min_norm(self.G, self.lu, B)

    def residual(self, Y: np.ndarray, B: np.ndarray) -> float:
        """``max |G Y - B| / (1 + max |B|)``: how well ``Y`` solves ``G Y = B``."""
        return _relative_residual(self.G, Y, B)


def _relative_residual(G: sp.csr_matrix, Y: np.ndarray, B: np.ndarray) -> float:
    """``max |G Y - B| / (1 + max |B|)``."""
    return float(np.abs(G @ Y - B).max(initial=0.0) / (1.0 + np.abs(B).max(initial=0.0)))


def _refined_min_norm(G: sp.csr_matrix, lu: Any, B: np.ndarray) -> np.ndarray:
    """``G' (G G')^{-1} B`` plus one refinement step on its residual ``B - G Y``. Why: at case6470_rte's standard
    form (51,140 rows) the plain solve leaves 1.7e-8 relative, one step 1.3e-13; with dependent rows (``B`` outside
    ``range(G)``) no step helps, which is what :func:`eliminate` tests."""
    B = np.ascontiguousarray(B, dtype=np.float64)
    Y = np.asarray(G.T @ lu.solve(B))
    return Y + np.asarray(G.T @ lu.solve(np.ascontiguousarray(B - G @ Y)))


def normal_lu(G: sp.spmatrix) -> Any | None:
    """The sparse LU of ``G G'``, or None when it is singular (dependent rows)."""
    G = sp.csr_matrix(G)
    try:
        return spla.splu(sp.csc_matrix(G @ G.T), permc_spec="COLAMD")
    except RuntimeError:  # "Factor is exactly singular"
        return None


def null_basis(G: sp.csr_matrix, lu: Any, seed: int = 0) -> tuple[np.ndarray, float] | None:
    """An orthonormal basis of ``null(G)`` (``(n, n - m)``) and ``max |G N|``, or None when the projected random
    vectors lose rank or leave a residual above ``NULL_TOL`` (relative): then ``G`` is rank deficient or too
    ill-conditioned for the normal equations."""
    m, n = G.shape
    d = n - m
    if d <= 0:
        return None
    X = np.random.default_rng(seed).standard_normal((n, d))
    X -= G.T @ lu.solve(np.ascontiguousarray(G @ X))
    X -= G.T @ lu.solve(np.ascontiguousarray(G @ X))
    N, r = np.linalg.qr(X)
    diag = np.abs(np.diag(r))
    resid = float(np.abs(G @ N).max())
    scale = 1.0 + float(abs(G).max())
    if not np.isfinite(resid) or diag.min() < RANK_TOL * diag.max() or resid > NULL_TOL * scale:
        return None
    return N, resid


def eliminate(G: sp.spmatrix, seed: int = 0) -> SparseElimination | None:
    """:class:`SparseElimination` of ``G``, or None (dependent rows, ``m >= n``, or no rows)."""
    G = sp.csr_matrix(G, dtype=np.float64)
    m, n = G.shape
    if m == 0 or m >= n:
        return None
    lu = normal_lu(G)
    if lu is None:
        return None
    # Rounding can hide an exactly singular G G' from the LU (tiny pivots instead of zero ones). A random right-hand
    # side lies outside range(G) when rows are dependent, so its min-norm "solution" then misses it by O(1).
    b = np.random.default_rng(seed + 1).standard_normal(m)
    if not _relative_residual(G, _refined_min_norm(G, lu, b), b) <= PARTICULAR_TOL:
        return None
    found = null_basis(G, lu, seed)
    if found is None:
        return None
    return SparseElimination(G, lu, found[0], found[1])
