"""The sparse elimination of the equalities (step 1 of :mod:`hardlinear.rules.reduced`).

:func:`reduce_sparse` writes the robust LP in null-space coordinates, ``F = F_p + N W`` with the min-norm particular
solution ``F_p`` and an orthonormal basis ``N`` of ``null(G)``, both from one sparse LU of ``G G'``: the
``_Reduced`` data of :mod:`hardlinear.rules.robust_lp` (per expression ``M_e``, ``C_e``, right-hand sides and
weight) in ``O(n d)`` memory instead of the dense SVD's ``O(n^2)``, to which it falls back when ``G`` has
dependent rows. :func:`_assemble_sparse` maps a solution ``W`` back to the rule ``F`` in x-coordinates.

The elimination also keeps the grid's own sparse rows (:class:`_OffsetLP`): the LPs that are dense when written
in ``W`` (the offset LP of :mod:`~hardlinear.rules.reduced.certification`, the sparse working sets of
:mod:`~hardlinear.rules.reduced.row_generation`) are solved in the grid's variables from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from hardlinear.constraints.family import InputBox, JointlyLinearFamily
from hardlinear.rules.robust_lp import _reduce, _Reduced, find_expression_pairs
from hardlinear.rules.sparse_elimination import normal_lu, null_basis


@dataclass
class SparseReduced:
    """The elimination ``F_u = Fp + N W`` (u-coordinates) and the expressions' data, as in ``_Reduced``."""

    red: _Reduced
    solve_normal: Any  # b -> (G G')^{-1} b, or None when the dense SVD was used
    method: str  # "sparse-lu" or "dense-svd"
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class _ReducedSparse(_Reduced):
    """``_Reduced`` with the grid's sparse rows kept for the offset LP (:class:`_OffsetLP`)."""

    offset_lp: Any = None


@dataclass
class _OffsetLP:
    """The offset LP of :func:`~hardlinear.rules.reduced.certification._best_offset` in the original variables:
    ``max t`` over ``(y: (n,), t)`` s.t. ``G y = b_eq0``, ``H_e y + w_e t <= b_up_e - spread_e`` and
    ``-H_e y + w_e t <= b_lo_e - spread_e`` (``H_e`` the expression's upper row, ``b`` the inequality right-hand
    sides at the box's centre), then ``W_0 = N' (y - F_p0)``. Its nonzeros are those of ``G`` and of the chosen rows
    of ``H``. Kept here, with the elimination that builds it: its rows are also those of the sparse working-set LP
    (:func:`~hardlinear.rules.reduced.row_generation.solve_working_set_sparse`)."""

    G: sp.csr_matrix
    b_eq0: np.ndarray
    H_upper: sp.csr_matrix  # (E, n)
    b_up: np.ndarray  # (E,)
    b_lo: np.ndarray  # (E,), inf for a lone row
    B_eq_active: np.ndarray | None = None  # (m_eq, q): the equalities' input columns (u-coordinates)
    B_up_active: np.ndarray | None = None  # (E, q): the upper rows' input columns (u-coordinates)

    def solve(self, red: _Reduced, spread: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, float] | None:
        import highspy

        from hardlinear.solvers.highs import quiet_highs

        m, n = self.G.shape
        two = red.lower[rows] >= 0
        Hr = self.H_upper[rows]
        w = red.w[rows]
        wcol = sp.csr_matrix(w[:, None])
        A = sp.vstack([
            sp.hstack([self.G, sp.csr_matrix((m, 1))]),
            sp.hstack([Hr, wcol]),
            sp.hstack([-Hr[two], wcol[two]]),
        ]).tocsc()
        inf = highspy.kHighsInf
        model = highspy.HighsLp()
        model.num_col_, model.num_row_ = n + 1, A.shape[0]
        model.col_cost_ = np.r_[np.zeros(n), -1.0]
        model.col_lower_, model.col_upper_ = np.full(n + 1, -inf), np.full(n + 1, inf)
        upper = np.concatenate([self.b_eq0, self.b_up[rows] - spread[rows], self.b_lo[rows][two] - spread[rows][two]])
        model.row_lower_ = np.concatenate([self.b_eq0, np.full(A.shape[0] - m, -inf)])
        model.row_upper_ = upper
        model.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        model.a_matrix_.start_, model.a_matrix_.index_, model.a_matrix_.value_ = A.indptr, A.indices, A.data
        h = quiet_highs()
        h.setOptionValue("threads", 1)
        h.setOptionValue("primal_feasibility_tolerance", 1e-10)
        h.setOptionValue("dual_feasibility_tolerance", 1e-10)
        h.passModel(model)
        h.run()
        if h.modelStatusToString(h.getModelStatus()) != "Optimal":
            return None
        z = np.asarray(h.getSolution().col_value)
        return red.N.T @ (z[:n] - red.Fp[:, 0]), float(z[n])


def _u_coordinates(B: np.ndarray, box: InputBox) -> np.ndarray:
    """``B T`` without forming ``T`` (``x = T (1, u)``, ``xi = mid + radius u``)."""
    out = B * np.concatenate([[1.0], box.radius])
    out[:, 0] = B[:, 0] + B[:, 1:] @ box.mid
    return out


def reduce_sparse(family: JointlyLinearFamily, weights: np.ndarray, seed: int = 0) -> SparseReduced:
    """``_Reduced`` from one sparse LU of ``G G'`` (see :mod:`hardlinear.rules.reduced`); the dense SVD of
    :func:`~hardlinear.rules.robust_lp._reduce` when ``G`` has dependent rows or no rows."""
    G = sp.csr_matrix(family.G)
    m, n = G.shape
    if m == 0 or m >= n:
        return SparseReduced(_reduce(family, weights), None, "dense-svd")
    lu = normal_lu(G)
    if lu is None:  # singular: dependent equality rows
        return SparseReduced(_reduce(family, weights), None, "dense-svd")
    Beq = _u_coordinates(family.B_eq, family.box)
    Bin = _u_coordinates(family.B_ineq, family.box)
    moves = np.any(Beq[:, 1:] != 0, axis=0) | np.any(Bin[:, 1:] != 0, axis=0)
    active = 1 + np.flatnonzero(moves & (family.box.radius > 0))
    cols = np.concatenate([[0], active])
    Fp = np.zeros((n, Beq.shape[1]))
    Fp[:, cols] = G.T @ lu.solve(np.ascontiguousarray(Beq[:, cols]))
    scale = 1.0 + np.abs(Beq).max()
    resid = np.abs(G @ Fp[:, cols] - Beq[:, cols]).max() / scale
    if not np.isfinite(resid) or resid > 1e-8:  # ill-conditioned or dependent rows: the SVD decides
        return SparseReduced(_reduce(family, weights), None, "dense-svd")
    found = null_basis(G, lu, seed)  # m < n here, so d = n - m >= 1
    if found is None:
        return SparseReduced(_reduce(family, weights), None, "dense-svd")
    N, null_resid = found
    upper, lower = find_expression_pairs(family.H, Bin[:, active])
    Hu = sp.csr_matrix(family.H)[upper]
    M = np.asarray(Hu @ N)
    HFp = np.asarray(Hu @ Fp[:, cols])
    C = HFp[:, 1:] - Bin[upper][:, active]
    R_up = Bin[upper, 0] - HFp[:, 0]
    lone = lower < 0
    R_lo = np.where(lone, np.inf, Bin[np.where(lone, 0, lower), 0] + HFp[:, 0])
    T = np.zeros((0, 0))  # not needed: _assemble_sparse works from the box directly
    offset_lp = _OffsetLP(
        G, Beq[:, 0].copy(), Hu, Bin[upper, 0].copy(), np.where(lone, np.inf, Bin[np.where(lone, 0, lower), 0]),
        np.ascontiguousarray(Beq[:, active]), np.ascontiguousarray(Bin[upper][:, active]),
    )
    red = _ReducedSparse(
        T, active, Fp, N, (np.zeros((0, 0)), np.zeros(0), np.zeros((0, n))), upper, lower, M, C, R_up, R_lo, weights[upper],
        offset_lp=offset_lp,
    )
    return SparseReduced(red, lu.solve, "sparse-lu", {"eq_residual_particular": float(resid), "null_residual": null_resid})


def _assemble_sparse(sr: SparseReduced, W: np.ndarray, family: JointlyLinearFamily) -> np.ndarray:
    """``F: (n, k + 1)`` in x-coordinates from ``Fp + N W`` (u-coordinates) on the active columns, then one
    least-squares correction ``F -= G' (G G')^{-1} (G F - B_eq)`` that removes the rounding."""
    red, box, G = sr.red, family.box, sp.csr_matrix(family.G)
    Fu = red.Fp.copy()
    Fu[:, np.concatenate([[0], red.active])] += red.N @ W
    F = np.zeros_like(Fu)
    moving = box.radius > 0
    F[:, 1:][:, moving] = Fu[:, 1:][:, moving] / box.radius[moving]
    fixed = 1 + np.flatnonzero(~moving)
    if fixed.size:  # zero-radius inputs: the min-norm solution of their column
        F[:, fixed] = G.T @ sr.solve_normal(np.ascontiguousarray(family.B_eq[:, fixed]))
    F[:, 0] = Fu[:, 0] - F[:, 1:] @ box.mid
    R = G @ F - family.B_eq
    return F - G.T @ sr.solve_normal(np.ascontiguousarray(R))
