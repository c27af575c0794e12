"""What the reduced solver's rule is checked against (steps 2 and 4 of :mod:`hardlinear.rules.reduced`).

:func:`verified_row_margins_chunked` is the independent verification: the worst slack over the box of every
inequality row, in float64, a chunk of rows at a time; the solver reports its minimum as ``t_star``, never its own
value. :func:`_best_offset` is the offset LP: with zero spreads its ``t`` bounds the robust LP's optimum from
above (the zero-spread certificate that ends the rounds), with a rule's spreads it re-optimises that rule's offset
``W_0`` (:func:`_polished`). :func:`_proximal_share` says how much of the working set's objective the proximal
term takes, i.e. whether the returned rule may fall short of the LP's optimum.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from hardlinear.constraints.family import InputBox
from hardlinear.rules.reduced.settings import VERIFY_CHUNK_ROWS
from hardlinear.rules.robust_lp import _expression_margins, _Reduced, verified_row_margins

if TYPE_CHECKING:
    from hardlinear.rules.reduced.interior_point import _Point


def verified_row_margins_chunked(
    F: np.ndarray, H: sp.spmatrix, B_ineq: np.ndarray, box: InputBox, weights: np.ndarray, chunk: int = VERIFY_CHUNK_ROWS
) -> np.ndarray:
    """``(m_ineq,)``: ``min_{xi in box} (B_ineq - H F)_i x / w_i`` in float64, ``chunk`` rows at a time, with ``H``
    sparse (:func:`~hardlinear.rules.robust_lp.verified_row_margins` over the box, in ``O(chunk k)`` memory)."""
    return verified_row_margins(F, sp.csr_matrix(H), B_ineq, box, weights, chunk=chunk)


def _best_offset(red: _Reduced, spread: np.ndarray, rows: np.ndarray | None = None) -> tuple[np.ndarray, float] | None:
    """``(W_0, t)`` maximising ``t`` for the given spreads ``(E,)`` over the expressions ``rows`` (all by default):
    ``M_e W_0 + w_e t <= R_up_e - spread_e`` and ``-M_e W_0 + w_e t <= R_lo_e - spread_e``; None when HiGHS does
    not solve it. Over every expression with zero spreads its ``t`` bounds the robust LP's optimum from above
    (every spread is nonnegative).

    Written in ``W_0`` this LP is dense (``2 E (d + 1)`` nonzeros: 90 M at case9241_pegase, where HiGHS
    needed >10 GB and did not finish), so when the elimination was sparse (``red.offset_lp``) it is solved in
    the grid's own variables instead: ``y = F_p0 + N W_0`` ranges over ``G y = b_eq0``, and the rows read
    ``H_e y + w_e t <= b_e - spread_e``, a sparse LP of the size of a DC-OPF
    (:class:`~hardlinear.rules.reduced.elimination._OffsetLP`)."""
    rows = np.arange(len(red.w)) if rows is None else np.asarray(rows)
    lp = getattr(red, "offset_lp", None)
    if lp is not None:
        return lp.solve(red, spread, rows)
    from scipy.optimize import linprog

    d = red.M.shape[1]
    M, w, two = red.M[rows], red.w[rows], red.lower[rows] >= 0
    A_ub = np.vstack([np.hstack([M, w[:, None]]), np.hstack([-M[two], w[two, None]])])
    b_ub = np.concatenate([red.R_up[rows] - spread[rows], red.R_lo[rows][two] - spread[rows][two]])
    res = linprog(
        np.r_[np.zeros(d), -1.0], A_ub=A_ub, b_ub=b_ub, bounds=[(None, None)] * (d + 1), method="highs",
        options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
    )
    return (res.x[:d], float(res.x[d])) if res.status == 0 else None


def _polished(red: _Reduced, W: np.ndarray, margins: np.ndarray) -> np.ndarray:
    """``W`` with its offset ``W_0`` re-optimised over every expression for its spreads (:func:`_best_offset`)
    when that raises its margin over every expression: the interior point can stall a little short of the
    working set's optimum (``STALL_GAP``), mostly in the offset's centring."""
    q = W.shape[1] - 1
    spread = np.abs(red.M @ W[:, 1:] + red.C).sum(axis=1) if q else np.zeros(len(red.w))
    best = _best_offset(red, spread)
    if best is None:
        return W
    polished = W.copy()
    polished[:, 0] = best[0]
    return polished if _expression_margins(red, polished).min() > margins.min() else W


def _proximal_share(x: _Point, eps: float, t: float) -> float:
    """``(eps/2) ||(W0, W)||^2 / |t|``: how much of the working set's objective is the proximal term (``t``
    floored at 1e-12: a zero margin has no relative scale)."""
    penalty = 0.5 * eps * (float(x.W0 @ x.W0) + float(np.sum(x.W * x.W)))
    return penalty / max(abs(t), 1e-12)
