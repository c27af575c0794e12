"""The robust LP of :mod:`hardlinear.rules.robust_lp` for large grids: the same LP, a structured solver.

Same program, same verified margin: ``max t`` over rules ``y = F x`` with ``G F = B_eq`` and every row's worst
case over the box at least ``w_i t``. What changes is how it is solved, so that memory stays linear in the
working set and the time in dense kernels:

1. **Sparse elimination of the equalities** (:func:`reduce_sparse`): ``F = F_p + N W`` with the min-norm
   particular solution ``F_p = G' (G G')^{-1} B_eq`` and an orthonormal basis ``N`` of ``null(G)`` obtained by
   projecting ``d = n - m_eq`` random vectors, both from one sparse LU of ``G G'`` (``m_eq x m_eq``, as sparse as
   the grid's Laplacian). The dense SVD of ``G`` that :func:`~hardlinear.rules.robust_lp._reduce` uses needs
   ``O(n^2)`` memory (1.5-2 GB at 2,000 buses, ~35 GB at 13,659); this needs ``O(n d)``. Falls back to the SVD
   when ``G`` has dependent rows (then ``G G'`` is singular).
2. **Closed-form robust rows**, one box-dual per two-sided expression, and **row generation** from the seed of
   the interior-point solver (:func:`~hardlinear.rules.robust_lp._seed`: the smallest half-ranges and the worst
   rows of the least-squares rule, here at most ``WORKING_SET_STEP`` of them, :func:`_seed_rule`), plus optional
   seed rows (:func:`solve_with_coarse_seed`: the working set of the same grid with loads aggregated by area).
   A round does not wait for its working set's optimum: from a gap of ``PROBE_GAP`` on, each iterate's rule is
   checked against every expression, and the round stops at the first one that violates rows outside the set
   (they are added), or that is **certified optimal**: every spread is nonnegative, so the margin with all spreads
   zero (:func:`_best_offset`) bounds ``t*`` from above, and a rule whose margin over every expression is within
   ``CERTIFY_GAP`` (1e-7 relative) of that bound is optimal to that gap, whatever the working set (on the large
   PGLib cases ``t*`` is a generator's half-range, and this ends the solve long before the interior point's slow
   final steps on its degenerate optimal face). The seed's own rule is checked the same way before any step.
   The offset LPs (that bound, the seed's offset, the polish) are solved in the grid's sparse variables
   (:class:`_OffsetLP`, a DC-OPF-sized LP), not in ``W_0``, where they are dense (``2 E (d + 1)`` nonzeros, which
   stopped case9241_pegase at 11 GB). A working set of ``|S| < d`` expressions is written in an orthonormal basis
   of its rows' span (:func:`_working_set`): the same LP and minimiser with ``|S|`` unknowns per input.
3. **A primal-dual interior point that exploits the block-angular structure** (:func:`solve_working_set`).
   On a working set of ``E`` expressions the LP is, per input ``j`` (``q`` of them), a block ``(W_j, U_j)`` with
   ``-U_ej <= M_e W_j + C_ej <= U_ej``, and the blocks meet only in the ``E`` spread rows and in ``(W_0, t)``.
   Each Newton step eliminates every block on its own (a ``d x d`` Cholesky of ``M' diag(delta_j) M`` per input;
   the blocks as one GEMM ``delta @ KR`` on the rows' packed outer products, the spread rows' Schur complement
   as two GEMMs over the stacked inverses: float64 BLAS-3 throughout), leaving a dense system of the spread rows (``<= 2E``) and ``(W_0, t)``. A general
   sparse LDL' of the assembled LP (Clarabel) fills in the same dense blocks with scalar kernels, and its memory
   grows with ``E q d`` nonzeros; here memory is ``O(E q + q d^2)`` (the per-input inverses are kept for the solves of
   each step when they fit in ``FACTOR_BUDGET_BYTES``, recomputed otherwise) and the time is
   ``O(q (E d^2 + E^2 d + d^3))`` per step, in chunks of inputs. ``device="cuda"`` runs these kernels and the
   conjugate gradients on a GPU (:class:`_NormalSolver`'s torch backend; ``benchmarks/bench_gpu.py`` times it).
4. **Independent verification** of the rule (:func:`verified_row_margins_chunked`): the worst slack over the box of
   every inequality row in float64, a chunk of rows at a time; ``t_star`` is that value, never the solver's.

With few inputs (zones, areas) the whole LP kept in the grid's sparse variables is smaller and faster
(:mod:`~hardlinear.rules.robust_lp_sparse`, which ``solver="auto"`` prefers while it fits). At case9241_pegase
with one area input this solver's rule is 2.3 % below the optimum: the proximal term ``(eps/2) ||W||^2`` below,
1e-9 of the data's scale (1,987 there), weighs 0.082 of ``t`` in the last working set, and the optimal rule is much
larger (``||W||^2`` = 63,143), so the regularised optimum trades margin for a smaller rule (benchmarks/README.md,
fourth and fifth passes). The rule is safe (the verified margin is reported) but not optimal there; the solve warns
when that share exceeds ``PROXIMAL_SHARE``, and ``exact_optimum=True`` re-solves with ``eps`` shrunk (exact on
14-300 buses even from ``eps`` = 1e-3; at case9241 not finished in 32 min).

Tolerances: the interior point stops at relative primal residual and gap ``IPM_TOL`` (1e-9) and dual residual
``DUAL_TOL`` (1e-6; the regularisation leaves ~1e-8). Each Newton system carries proximal terms ``PRIMAL_`` /
``DUAL_REGULARIZATION`` (1e-8 of the data's scale) in its factorisation; conjugate gradients then solve the exact
system, preconditioned by it. Near the optimum the elimination's rounding can defeat them (``y/s`` spans ~1e-20..
1e20): the iteration then returns the best point reached if its gap is below ``STALL_GAP`` (1e-5) and records it
(``info["ipm_gap"]``, the last round's). The proximal term ``(eps/2) ||W||^2`` (``REGULARIZATION`` =
1e-9 relative) picks one rule among the many optimal ones. None of this touches the guarantee: ``t_star`` is the
verified margin of the rule actually returned. Measured: ``t*`` equal to the interior point's (Clarabel) to 1e-6
relative or better on 14-300 buses (benchmarks/README.md; tests/test_rule_solver_reduced.py).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from hardlinear.constraints import InputBox, JointlyLinearFamily
from hardlinear.rules.robust_lp import (
    ROW_TOLERANCE,
    RuleSolution,
    _expression_margins,
    _reduce,
    _Reduced,
    find_expression_pairs,
)
from hardlinear.rules.sparse_elimination import normal_lu, null_basis

log = logging.getLogger(__name__)

IPM_TOL = 1e-9
REGULARIZATION = 1e-9
# The proximal term's weight in the final working set's objective, (eps/2)||W||^2 / |t|. Above this share the
# rule's margin may be below the LP's optimum (by at most (eps/2)||W_opt||^2): a warning says so, and with
# exact_optimum=True the working set is solved again with eps shrunk to bring the share here (at most
# PROXIMAL_RESOLVES times; a quadratic regularisation of an LP is exact below some eps, so the share need not go to
# zero). Measured: 0.082 at case9241_pegase with one area input (rule 2.3 % short; the optimal rule's ||W||^2 is
# ~140x the regularised one's), <= 7e-4 on 14-300 buses (margins equal to Clarabel's to 1e-7). With the re-solve,
# case9241's rounds after it each found one to three more rows and took 1-5 min: not finished in 32 min (t 0.00570
# of 0.00573 at round 17), against 17 min for the short rule; hence opt-in.
PROXIMAL_SHARE = 1e-3
PROXIMAL_RESOLVES = 3
MAX_IPM_ITERATIONS = 200
PCG_ITERATIONS = 50
# Conjugate-gradient iterations spent on the exact system before the step falls back to the regularised one
# (which its own factorisation preconditions exactly): near the optimum the exact one can take all 50, and each
# iteration is a pass over every input's block (measured: 85 s steps at case2000_goc under load).
EXACT_PCG_ITERATIONS = 10
# The interior point's starting absolute values (see solve_working_set): with every load of case2000_goc an input
# (q = 1010) a start of 1 each made the spreads start at ~1000 and its second round stall at gap 0.5.
START_SPREAD = 1.0
# Proximal (primal) and dual regularisation of each Newton system, relative to the data's scale.
PRIMAL_REGULARIZATION = 1e-8
DUAL_REGULARIZATION = 1e-8
# Near the optimum y/s spans ~1e-20..1e20 and the block elimination loses accuracy (at ~1e-7 relative gap on
# the paper's 14-bus case): the iteration then stops at the best point reached, if its gap is below STALL_GAP.
STALL_GAP = 1e-5
# Dual residual accepted (relative): the regularisation leaves ~1e-8; the margin is verified on the primal rule.
DUAL_TOL = 1e-6
# Row generation does not wait for a working set's optimum: from an iterate with a gap below PROBE_GAP on, the
# rows outside the set that the iterate's rule violates are added at once (a round that finds none runs on to
# IPM_TOL). Each round starts cold: a warm start from the previous round's iterate (new rows' slacks floored,
# their violation left as primal infeasibility) was measured slower at case2000_goc (the steps stay short).
PROBE_GAP = 1e-3
# A rule whose verified margin over every expression is within CERTIFY_GAP (relative) of the zero-spread bound
# is optimal to that gap and stops the solve (the tests ask 1e-6 against the interior point). Once an
# iterate's t is within POLISH_WINDOW of the bound, its offset W_0 is also re-optimised (an LP) before checking.
POLISH_WINDOW = 1e-5
CERTIFY_GAP = 1e-7
# The seed's least-squares rows and each round's new rows: d of them, at most WORKING_SET_STEP. A working set of
# |S| < d expressions is solved in a basis of |S| unknowns per input (_working_set), so its Newton steps cost
# O(q |S|^3) instead of O(q d^3) (d = 1,444 at case9241_pegase, 4,091 at case13659_pegase).
WORKING_SET_STEP = 500
# working_sets="sparse": each round adds up to SPARSE_STEP expressions.
SPARSE_STEP = 2000
# Tried in this order on each sparse working-set LP: HiGHS's interior point without crossover (no proximal term:
# any optimal rule), then Clarabel (with it). Clarabel first stopped with NumericalError on case9241_pegase's
# second working set (1,179 expressions, 117 s for the first); at case6470_rte (one area) HiGHS's rounds took
# 0.4-2.1 s against Clarabel's 2.6-2.9 s, both certified in 4 rounds.
SPARSE_LP_SOLVERS = ("highs", "clarabel")
COARSE_SEED_MIN_INPUTS = 200  # solve_with_coarse_seed: below this many inputs the rule is solved directly
POLISH_ROWS = 1000  # expressions in that LP (the smallest margins of the iterate's rule; at least 4 (d + 1))
# Per-input Cholesky factors (q d^2 float64) are kept between the two solves of a Newton step up to this size.
FACTOR_BUDGET_BYTES = 1.5e9
# Inputs processed together in one batched kernel: bounds the temporaries to CHUNK_BYTES (DEVICE_CHUNK_BYTES on a
# GPU, where small batches leave it idle; the temporaries of one chunk are ~5x this).
CHUNK_BYTES = 64e6
DEVICE_CHUNK_BYTES = 512e6
# On a GPU the kept factors and the packed outer products may use these shares of its free memory instead of
# FACTOR_BUDGET_BYTES and PACKED_BYTES, when larger (recomputing the factors in every block solve is what a
# small budget costs).
DEVICE_FACTOR_SHARE = 0.5
DEVICE_PACKED_SHARE = 0.2
# The working set's packed outer products (E d^2 / 2 float64) are kept up to this size; beyond it the blocks are
# formed as batched X' X products.
PACKED_BYTES = 512e6
# Rows of B_ineq - H F formed at once in the verification.
VERIFY_CHUNK_ROWS = 4096


# --- sparse elimination -----------------------------------------------------------------------------------
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


def _u_coordinates(B: np.ndarray, box: InputBox) -> np.ndarray:
    """``B T`` without forming ``T`` (``x = T (1, u)``, ``xi = mid + radius u``)."""
    out = B * np.concatenate([[1.0], box.radius])
    out[:, 0] = B[:, 0] + B[:, 1:] @ box.mid
    return out


def reduce_sparse(family: JointlyLinearFamily, weights: np.ndarray, seed: int = 0) -> SparseReduced:
    """``_Reduced`` from one sparse LU of ``G G'`` (see the module docstring); the dense SVD of
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


def verified_row_margins_chunked(
    F: np.ndarray, H: sp.spmatrix, B_ineq: np.ndarray, box: InputBox, weights: np.ndarray, chunk: int = VERIFY_CHUNK_ROWS
) -> np.ndarray:
    """``(m_ineq,)``: ``min_{xi in box} (B_ineq - H F)_i x / w_i`` in float64, ``chunk`` rows at a time (the
    same closed form as :func:`~hardlinear.rules.robust_lp.verified_row_margins`, in ``O(chunk k)`` memory)."""
    H = sp.csr_matrix(H)
    out = np.empty(H.shape[0])
    for s in range(0, H.shape[0], chunk):
        e = min(s + chunk, H.shape[0])
        Z = B_ineq[s:e] - np.asarray(H[s:e] @ F)
        out[s:e] = (Z[:, 0] + Z[:, 1:] @ box.mid - np.abs(Z[:, 1:]) @ box.radius) / weights[s:e]
    return out


# --- the structured interior point -----------------------------------------------------------------------
@dataclass
class _WorkingSet:
    """The working-set LP's data: ``M: (E, d)``, ``C: (E, q)``, right-hand sides and weights; ``two`` marks
    expressions with a lower row."""

    M: np.ndarray
    C: np.ndarray
    R_up: np.ndarray
    R_lo: np.ndarray
    w: np.ndarray
    two: np.ndarray

    @property
    def sizes(self) -> tuple[int, int, int]:
        return self.M.shape[1], self.C.shape[1], self.M.shape[0]


class _Point:
    """Primal ``x = (W0: d, t, W: (q, d), U: (q, E))``, slacks and duals of the rows
    ``a: (q, E)``, ``b: (q, E)``, ``up: (E,)``, ``lo: (E2,)``."""

    def __init__(self, W0, t, W, U):
        self.W0, self.t, self.W, self.U = W0, t, W, U

    def axpy(self, alpha, other):
        return _Point(self.W0 + alpha * other.W0, self.t + alpha * other.t, self.W + alpha * other.W, self.U + alpha * other.U)


def _slacks(ws: _WorkingSet, x: _Point) -> dict[str, np.ndarray]:
    """``b - A x`` for every row group."""
    MW = x.W @ ws.M.T  # (q, E)
    MW0 = ws.M @ x.W0
    colsum = x.U.sum(axis=0)
    return {
        "a": x.U - MW - ws.C.T,
        "b": x.U + MW + ws.C.T,
        "up": ws.R_up - colsum - MW0 - ws.w * x.t,
        "lo": (ws.R_lo - colsum + MW0 - ws.w * x.t)[ws.two],
    }


def _AT(ws: _WorkingSet, y: dict[str, np.ndarray]) -> _Point:
    """``A' y`` in the primal layout."""
    ylo = np.zeros_like(y["up"]) if isinstance(y["up"], np.ndarray) else y["up"].new_zeros(y["up"].shape)  # or a tensor
    ylo[ws.two] = y["lo"]
    return _Point(
        ws.M.T @ (y["up"] - ylo),
        float(ws.w @ (y["up"] + ylo)),
        (y["a"] - y["b"]) @ ws.M,
        -y["a"] - y["b"] + (y["up"] + ylo)[None, :],
    )


def _A(ws: _WorkingSet, x: _Point) -> dict[str, np.ndarray]:
    """``A x`` per row group (the linear part of ``_slacks`` with the opposite sign)."""
    MW = x.W @ ws.M.T
    MW0 = ws.M @ x.W0
    colsum = x.U.sum(axis=0)
    return {"a": MW - x.U, "b": -MW - x.U, "up": colsum + MW0 + ws.w * x.t, "lo": (colsum - MW0 + ws.w * x.t)[ws.two]}


@dataclass
class PackedOuterProducts:
    """``values: (E, d (d + 1) / 2)`` with row ``e`` the lower triangle of ``m_e m_e'``; ``rows``, ``cols`` its
    positions. ``delta @ values`` is then every block's ``M' diag(delta_j) M`` (lower triangle) in one GEMM."""

    values: Any
    rows: Any
    cols: Any


def packed_outer_products(M: np.ndarray, budget_bytes: float = PACKED_BYTES, device: Any = None) -> PackedOuterProducts | None:
    """The packed outer products of the rows of ``M: (E, d)``, or None when they exceed ``budget_bytes``;
    on ``device`` (a ``torch.device``; None: CPU tensors sharing ``M``'s memory, today's path)."""
    import torch

    E, d = M.shape
    if E * d * (d + 1) / 2 * 8 > budget_bytes:
        return None
    rows, cols = torch.tril_indices(d, d, device=device)
    M_t = torch.from_numpy(M) if device is None else torch.as_tensor(M, device=device)
    return PackedOuterProducts(M_t[:, rows] * M_t[:, cols], rows, cols)


def device_budget(device: Any, default: float, share: float) -> float:
    """Bytes a cached array may take: ``default``, or on a CUDA device ``share`` of its free memory if larger."""
    if device is None or device.type != "cuda":
        return default
    import torch

    return max(default, share * torch.cuda.mem_get_info(device)[0])


class _NormalSolver:
    """Solves ``(A' D A + eps I_W) dx = r`` for one ``D`` by block elimination (see the module docstring).

    Every kernel of the factorisation is one large float64 GEMM per chunk of inputs: the blocks'
    ``S_j = M' diag(delta_j) M`` as ``delta @ KR`` (``KR: (E, d (d + 1) / 2)``, the rows' packed outer products
    ``m_e m_e'``, built once per working set by :func:`packed_outer_products`), a batched Cholesky and inverse,
    and the spread rows' Schur complement ``Psi = sum_j diag(QP_j) M S_j^{-1} M' diag(QP_j)`` as two GEMMs over
    the stacked inverses.

    ``device``: None (the default path) runs these kernels as CPU torch ops on the numpy arrays' memory; a
    ``torch.device`` runs them there (the torch backend): the per-input scalings ``(q, E)`` are sent once per
    Newton step, the spread rows' ``E x E`` Schur complement comes back for the host's LU, and :meth:`pcg` runs
    every conjugate-gradient iteration there (the exact operator, the block solves; ``m_s + d + 1`` numbers
    cross for the LU per preconditioner solve): a direction sends its right-hand side and fetches ``dx``. The backend
    keeps ``L_j^{-1}`` (a batched triangular solve) instead of ``S_j^{-1}`` and forms ``Psi`` as
    ``sum_j Z_j' Z_j`` with ``Z_j = L_j^{-1} M' diag(QP_j)``: batched triangular solves and GEMMs only, float64
    throughout; on a GPU it takes chunks of ``DEVICE_CHUNK_BYTES`` and may keep larger factors
    (:func:`device_budget`)."""

    def __init__(
        self, ws: _WorkingSet, D: dict[str, np.ndarray], eps: float, rho: float, KR: Any = None,
        timers: dict[str, float] | None = None, device: Any = None,
    ):
        import torch

        self.torch, self.ws, self.eps, self.device = torch, ws, eps + rho, device
        self.timers = timers if timers is not None else {}
        d, q, E = ws.sizes
        Da, Db = D["a"], D["b"]
        self.P = Da + Db + rho  # U's diagonal (rho: the proximal term on U)
        self.QP = (Db - Da) / self.P
        delta = (4.0 * Da * Db + rho * (Da + Db)) / self.P  # (q, E): P - Q^2 / P without cancellation
        gpu = device is not None and device.type != "cpu"
        self.chunk = max(1, int((DEVICE_CHUNK_BYTES if gpu else CHUNK_BYTES) // (8 * max(1, d * max(d, E)))))
        self.keep = q * d * d * 8 <= device_budget(device, FACTOR_BUDGET_BYTES, DEVICE_FACTOR_SHARE)
        self.M_t = self._tensor(ws.M)
        self.KR = KR
        self.factors: list[Any] = []
        Psi = torch.zeros((E, E), dtype=torch.float64, device=device)
        MT = self.M_t.T  # (d, E)
        if device is not None:  # the block solves' per-input scalings, sent once per Newton step
            self.QP_t, self.P_t = self._tensor(self.QP), self._tensor(self.P)
        for s in range(0, q, self.chunk):
            c = min(self.chunk, q - s)
            L = self._factor(delta[s : s + c])
            QP = (self._tensor(self.QP[s : s + c]) if device is None else self.QP_t[s : s + c])[:, None, :]  # (c, 1, E)
            if device is None:
                tic = time.perf_counter()
                Sinv = torch.cholesky_inverse(L)  # (c, d, d), symmetric
                self._tick("inverse", tic)
                tic = time.perf_counter()
                V = (Sinv.reshape(c * d, d) @ MT).view(c, d, E).mul_(QP)  # S_j^{-1} M' diag(QP_j), one GEMM
                Y = (MT[None] * QP).reshape(c * d, E)  # M' diag(QP_j), stacked
                Psi.addmm_(Y.T, V.view(c * d, E))
                self._tick("schur", tic)
                if self.keep:  # explicit inverses: the many later solves become batched mat-vecs
                    self.factors.append(Sinv)
                continue
            tic = time.perf_counter()
            eye = torch.eye(d, dtype=torch.float64, device=device).expand(c, d, d)
            Linv = torch.linalg.solve_triangular(L, eye, upper=False)  # (c, d, d): L_j^{-1}
            self._tick("inverse", tic)
            tic = time.perf_counter()
            Z = (Linv @ (MT[None] * QP)).reshape(c * d, E)  # L_j^{-1} M' diag(QP_j), stacked
            Psi.addmm_(Z.T, Z)  # sum_j Z_j' Z_j
            self._tick("schur", tic)
            if self.keep:
                self.factors.append(Linv)
        Psi = Psi.cpu().numpy()
        Psi[np.diag_indices(E)] += (1.0 / self.P).sum(axis=0)
        self.delta = None if self.keep else delta
        # the spread rows' system: Phi = D_s^{-1} + T Psi T', T = [I; I_two]
        two = np.flatnonzero(ws.two)
        self.two = two
        Ds = np.concatenate([D["up"], D["lo"]])
        T_idx = np.concatenate([np.arange(E), two])
        Phi = Psi[np.ix_(T_idx, T_idx)]
        Phi[np.diag_indices_from(Phi)] += 1.0 / Ds
        self.T_idx = T_idx
        sign = np.concatenate([np.ones(E), -np.ones(len(two))])
        self.Lg = np.hstack([ws.M[T_idx] * sign[:, None], ws.w[T_idx][:, None]])  # (m_s, d + 1)
        # one augmented system [[Phi, -Lg], [Lg', Reg_g]] [v; dg] = [rho; r_g], by LU with pivoting: no explicit
        # Phi^{-1} (Phi mixes tiny and huge entries near the optimum)
        m_s = len(T_idx)
        reg = np.full(d + 1, rho)
        reg[:d] += eps
        K = np.block([[Phi, -self.Lg], [self.Lg.T, np.diag(reg)]])
        from scipy.linalg import lu_factor, lu_solve

        self.lu, self.lu_solve, self.m_s = lu_factor(K, check_finite=False), lu_solve, m_s

    def _tensor(self, a: np.ndarray):
        """``a`` as a float64 tensor: a view on the CPU (default path), a copy on the backend's device."""
        if self.device is None:
            return self.torch.from_numpy(np.ascontiguousarray(a))
        return self.torch.as_tensor(np.ascontiguousarray(a), dtype=self.torch.float64, device=self.device)

    def _tick(self, name: str, tic: float) -> None:
        if self.device is not None and self.device.type == "cuda":  # kernels run asynchronously: wait for them
            self.torch.cuda.synchronize(self.device)
        self.timers[name] = self.timers.get(name, 0.0) + time.perf_counter() - tic

    def _factor(self, delta_chunk: np.ndarray):
        """Cholesky factors ``(c, d, d)`` of the blocks ``M' diag(delta_j) M + eps I`` of one chunk of inputs."""
        torch = self.torch
        tic = time.perf_counter()
        d = self.ws.sizes[0]
        delta_t = self._tensor(delta_chunk)
        if self.KR is not None:  # one GEMM on the packed outer products, then the lower triangles filled in
            packed = delta_t @ self.KR.values  # (c, d (d + 1) / 2)
            S = torch.zeros((len(delta_chunk), d, d), dtype=torch.float64, device=self.device)
            S[:, self.KR.rows, self.KR.cols] = packed
        else:
            X = self.M_t[None, :, :] * delta_t.sqrt()[:, :, None]  # (c, E, d)
            S = X.transpose(1, 2) @ X
        # eps, plus a relative floor so that the Cholesky exists when delta spans 1e-20..1e20 (the refinement
        # against the exact operator removes the difference)
        diag = S.diagonal(dim1=1, dim2=2)
        diag.add_(self.eps + 1e-13 * diag.amax(dim=1, keepdim=True))
        self._tick("blocks", tic)
        tic = time.perf_counter()
        L = torch.linalg.cholesky(S)  # reads the lower triangle only
        self._tick("cholesky", tic)
        return L

    def _block_solve(self, rW: np.ndarray, rU: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``K_j^{-1} (rW_j, rU_j)`` for all inputs: ``a = S_W^{-1} (rW - M' (Q/P) rU)``, ``b = (rU - Q M a) / P``."""
        torch = self.torch
        ws = self.ws
        rhs = rW - (self.QP * rU) @ ws.M  # (q, d)
        q = rhs.shape[0]
        a = np.empty_like(rhs)
        for i, s in enumerate(range(0, q, self.chunk)):
            block = torch.from_numpy(rhs[s : s + self.chunk])[:, :, None]
            if self.keep:
                a[s : s + self.chunk] = (self.factors[i] @ block).squeeze(2).numpy()
            else:
                L = self._factor(self.delta[s : s + self.chunk])
                a[s : s + self.chunk] = torch.cholesky_solve(block, L).squeeze(2).numpy()
        b = rU / self.P - self.QP * (a @ ws.M.T)
        return a, b

    def _block_solve_t(self, rW, rU):
        """:meth:`_block_solve` on the backend's device, for tensors there: ``S_j^{-1} r = L_j^{-T} (L_j^{-1} r)``
        with the kept ``L_j^{-1}`` (or a Cholesky solve on recomputed factors)."""
        torch = self.torch
        rhs = (rW - (self.QP_t * rU) @ self.M_t)[:, :, None]  # (q, d, 1)
        a = torch.empty_like(rhs)
        for i, s in enumerate(range(0, rhs.shape[0], self.chunk)):
            block = rhs[s : s + self.chunk]
            if self.keep:
                Linv = self.factors[i]
                a[s : s + self.chunk] = Linv.mT @ (Linv @ block)
            else:
                a[s : s + self.chunk] = torch.cholesky_solve(block, self._factor(self.delta[s : s + self.chunk]))
        a = a.squeeze(2)
        return a, rU / self.P_t - self.QP_t * (a @ self.M_t.T)

    def solve(self, r: _Point) -> _Point:
        """The preconditioner: this factorisation's solution of the regularised system for ``r`` (numpy)."""
        if self.device is not None:
            return self._from_device(self._solve_t(self._to_device(r)))
        d = self.ws.sizes[0]
        aW, bU = self._block_solve(r.W, r.U)
        rho = bU.sum(axis=0)[self.T_idx]
        sol = self.lu_solve(self.lu, np.concatenate([rho, r.W0, [r.t]]), check_finite=False)
        v, dg = sol[: self.m_s], sol[self.m_s :]
        tv = np.zeros(self.ws.sizes[2])
        np.add.at(tv, self.T_idx, v)
        aW2, bU2 = self._block_solve(np.zeros_like(r.W), np.broadcast_to(tv, r.U.shape))
        return _Point(dg[:d], float(dg[d]), aW - aW2, bU - bU2)

    def _solve_t(self, r: _Point) -> _Point:
        """:meth:`solve` for a point of tensors on the backend's device; only the spread rows' system (``m_s + d +
        1`` numbers each way) goes through the host's LU."""
        torch = self.torch
        d, _, E = self.ws.sizes
        if not hasattr(self, "T_idx_t"):
            self.T_idx_t = torch.as_tensor(self.T_idx, device=self.device)
        aW, bU = self._block_solve_t(r.W, r.U)
        rho = bU.sum(dim=0)[self.T_idx_t]
        host = torch.cat([rho, r.W0, rho.new_tensor([r.t])]).cpu().numpy()
        sol = self.lu_solve(self.lu, host, check_finite=False)
        v, dg = self._tensor(sol[: self.m_s]), sol[self.m_s :]
        tv = torch.zeros(E, dtype=torch.float64, device=self.device).index_add_(0, self.T_idx_t, v)
        aW2, bU2 = self._block_solve_t(torch.zeros_like(r.W), tv.expand(r.U.shape))
        return _Point(self._tensor(dg[:d]), float(dg[d]), aW - aW2, bU - bU2)

    def pcg(self, D: dict[str, np.ndarray], rhs: _Point, eps: float, rho: float, max_iter: int) -> tuple[_Point, float, int]:
        """:func:`_pcg` on the exact system ``(A' D A + eps I_W + rho I) dx = rhs`` preconditioned by this
        factorisation; with a device, every iteration runs there (``rhs`` sent, ``dx`` fetched once)."""
        if self.device is None:
            return _pcg(lambda v: _normal_apply(self.ws, D, eps, rho, v), self.solve, rhs, max_iter=max_iter)
        if getattr(self, "_ws_t", None) is None:
            ws = self.ws
            self._ws_t = _WorkingSet(self.M_t, *(self._tensor(a) for a in (ws.C, ws.R_up, ws.R_lo, ws.w)), self.torch.as_tensor(ws.two, device=self.device))
        cached = getattr(self, "_D_t", None)
        if cached is None or cached[0] is not D:  # the step's D_exact, then (rarely) D_reg
            self._D_t = (D, {k: self._tensor(v) for k, v in D.items()})
        ws_t, D_t = self._ws_t, self._D_t[1]
        x, rel, solves = _pcg(lambda v: _normal_apply(ws_t, D_t, eps, rho, v), self._solve_t, self._to_device(rhs), max_iter=max_iter)
        return self._from_device(x), rel, solves

    def _to_device(self, p: _Point) -> _Point:
        return _Point(self._tensor(p.W0), float(p.t), self._tensor(p.W), self._tensor(p.U))

    @staticmethod
    def _from_device(p: _Point) -> _Point:
        return _Point(p.W0.cpu().numpy(), float(p.t), p.W.cpu().numpy(), p.U.cpu().numpy())


def _pcg(apply, precondition, rhs: _Point, tol: float = 1e-12, max_iter: int = PCG_ITERATIONS) -> tuple[_Point, float, int]:
    """Conjugate gradients on ``apply(x) = rhs`` preconditioned by the block elimination (which is exact up to
    rounding, so this usually stops after 1-3 iterations; it keeps the step accurate where the elimination's
    rounding is not small near the optimum). Returns ``(x, relative residual, preconditioner solves)``."""
    x = precondition(rhs)
    r = rhs.axpy(-1.0, apply(x))
    norm_rhs = np.sqrt(_dot(rhs, rhs)) or 1.0
    z = precondition(r)
    p = z
    rz = _dot(r, z)
    rel = np.sqrt(_dot(r, r)) / norm_rhs
    solves = 2
    for _ in range(max_iter):
        if rel <= tol or rz <= 0:
            break
        Ap = apply(p)
        pAp = _dot(p, Ap)
        if pAp <= 0:
            break
        alpha = rz / pAp
        x = x.axpy(alpha, p)
        r = r.axpy(-alpha, Ap)
        rel = np.sqrt(_dot(r, r)) / norm_rhs
        z = precondition(r)
        solves += 1
        rz_new = _dot(r, z)
        p = z.axpy(rz_new / rz, p)
        rz = rz_new
    return x, float(rel), solves


def _normal_apply(ws: _WorkingSet, D: dict[str, np.ndarray], eps: float, rho: float, dx: _Point) -> _Point:
    """``(A' D A + eps I_W + rho I) dx``, matrix-free."""
    Adx = _A(ws, dx)
    out = _AT(ws, {k: D[k] * Adx[k] for k in D})
    return _Point(out.W0 + (eps + rho) * dx.W0, out.t + rho * dx.t, out.W + (eps + rho) * dx.W, out.U + rho * dx.U)


def _dot(x: _Point, y: _Point) -> float:
    return float(x.W0 @ y.W0 + x.t * y.t + (x.W * y.W).sum() + (x.U * y.U).sum())  # numpy arrays or tensors


def _norm_inf(x) -> float:
    if isinstance(x, _Point):
        return max(np.abs(x.W0).max(initial=0), abs(x.t), np.abs(x.W).max(initial=0), np.abs(x.U).max(initial=0))
    return max(np.abs(v).max(initial=0) for v in x.values())


def solve_working_set(
    ws: _WorkingSet,
    eps: float = REGULARIZATION,
    threads: int = 1,
    tol: float = IPM_TOL,
    probe: Any = None,
    device: Any = None,
) -> tuple[_Point, float, dict[str, Any]]:
    """``max t`` on the working set by Mehrotra's predictor-corrector; returns ``(x, t, info)``.

    ``min -t + (eps/2) ||(W0, W)||^2`` s.t. ``A x + s = b``, ``s >= 0``; raises ``RuntimeError`` when it does
    not converge (an unbounded margin included: ``t`` then grows without limit).

    ``probe(x, t) -> bool``, called at each iterate once the gap is below ``PROBE_GAP``: True stops the solve
    there (``info["probed"]``), for row generation to add the rows that iterate violates or to return a rule
    certified optimal. ``device``: where the Newton step's heavy kernels run (:class:`_NormalSolver`)."""
    d, q, E = ws.sizes
    scale = max(1.0, np.abs(ws.C).max(initial=0), np.abs(ws.R_up).max(initial=0))
    eps = eps * scale
    rho, delta = PRIMAL_REGULARIZATION * scale, DUAL_REGULARIZATION / scale
    # the absolute values start min(1, START_SPREAD / q) above |C|: a row's spread (their sum over the q inputs)
    # then starts O(START_SPREAD), not O(q)
    x = _Point(np.zeros(d), 0.0, np.zeros((q, d)), np.abs(ws.C.T) + min(1.0, START_SPREAD / max(1, q)))
    s0 = _slacks(ws, x)
    x.t = float(min(np.min((s0["up"]) / ws.w), np.min(s0["lo"] / ws.w[ws.two]) if ws.two.any() else np.inf)) - 1.0
    s = _slacks(ws, x)
    y = {k: np.ones_like(v) for k, v in s.items()}
    b_norm = 1.0 + max(np.abs(ws.C).max(initial=0), np.abs(ws.R_up).max(initial=0), np.abs(ws.R_lo[ws.two]).max(initial=0))
    n_rows = sum(v.size for v in s.values())
    info: dict[str, Any] = {"eps": eps}
    timers: dict[str, float] = {}
    info["timers_s"] = timers
    KR = packed_outer_products(ws.M, device_budget(device, PACKED_BYTES, DEVICE_PACKED_SHARE), device)
    best = None
    for it in range(1, MAX_IPM_ITERATIONS + 1):
        ATy = _AT(ws, y)
        # dual residual r_d = -(c + eps x_W + A'y), c = -1 on t
        rd = _Point(-(ATy.W0 + eps * x.W0), -(ATy.t - 1.0), -(ATy.W + eps * x.W), -ATy.U)
        Ax = _A(ws, x)
        b = _b(ws)
        rp = {k: b[k] - Ax[k] - s[k] for k in s}
        mu = sum(float(np.sum(s[k] * y[k])) for k in s) / n_rows
        pres = _norm_inf(rp) / b_norm
        dres = _norm_inf(rd) / (1.0 + _norm_inf(ATy))
        gap = mu * n_rows / (1.0 + abs(x.t) * float(np.max(ws.w)))
        log.debug("ipm %d: t=%.10g pres=%.2e dres=%.2e gap=%.2e solve=%.1e", it, x.t, pres, dres, gap, info.get("solve_residual", 0.0))
        if pres < tol and dres < DUAL_TOL and gap < tol:
            info.update(ipm_iterations=it, pres=pres, dres=dres, gap=gap)
            return x, x.t, info
        if probe is not None and gap < PROBE_GAP and pres < 1e-6 and probe(x, x.t):
            info.update(ipm_iterations=it, pres=pres, dres=dres, gap=gap, probed=True)
            return x, x.t, info
        if pres < 1e-8 and dres < DUAL_TOL and (best is None or gap < best[3]):
            best = (x, pres, dres, gap)
        if best is not None and (dres > 1e3 * max(best[2], 1e-12) or info.get("solve_residual", 0.0) > 1e-4):
            if best[3] < STALL_GAP:  # numerical stall: the best point is optimal to best[3]
                info.update(ipm_iterations=it, pres=best[1], dres=best[2], gap=best[3], stalled=True)
                return best[0], best[0].t, info
            raise RuntimeError(f"structured interior point lost accuracy at gap {best[3]:.2e} (iteration {it})")
        if not np.isfinite(x.t) or abs(x.t) > 1e12 * b_norm:
            raise RuntimeError(f"structured interior point diverged (t = {x.t:.3g}): is the margin unbounded on this working set?")
        # The factorisation uses the regularised scaling D = y / (s + delta y) (bounded, so the elimination stays
        # accurate); conjugate gradients preconditioned by it then solve the exact system (delta = 0), which keeps
        # the fast final convergence; where they cannot (near the end, on degenerate rows), the regularised system.
        D_reg = {k: y[k] / (s[k] + delta * y[k]) for k in s}
        D_exact = {k: y[k] / s[k] for k in s}
        info["solve_residual"] = 0.0
        tic = time.perf_counter()
        ns = _NormalSolver(ws, D_reg, eps, rho, KR, timers, device)
        timers["factor"] = timers.get("factor", 0.0) + time.perf_counter() - tic
        tic = time.perf_counter()

        def direction(rc, ns=ns, D_reg=D_reg, D_exact=D_exact, s=s, y=y, rp=rp, rd=rd):
            scratch: dict[str, Any] = {}
            out = _direction(ws, ns, D_exact, s, y, rp, rd, rc, eps, rho, scratch, EXACT_PCG_ITERATIONS)
            info["block_solves"] = info.get("block_solves", 0) + scratch["block_solves"]
            if scratch["solve_residual"] <= 1e-9:
                return out
            info["regularised_steps"] = info.get("regularised_steps", 0) + 1
            return _direction(ws, ns, D_reg, s, y, rp, rd, rc, eps, rho, info)

        dx, ds, dy = direction({k: -s[k] * y[k] for k in s})
        ap, ad = _step(s, ds), _step(y, dy)
        mu_aff = sum(float(np.sum((s[k] + ap * ds[k]) * (y[k] + ad * dy[k]))) for k in s) / n_rows
        sigma = (mu_aff / mu) ** 3
        dx, ds, dy = direction({k: sigma * mu - s[k] * y[k] - ds[k] * dy[k] for k in s})
        ap, ad = 0.99 * _step(s, ds), 0.99 * _step(y, dy)
        ap, ad = min(1.0, ap), min(1.0, ad)
        timers["directions"] = timers.get("directions", 0.0) + time.perf_counter() - tic
        x = x.axpy(ap, dx)
        s = {k: s[k] + ap * ds[k] for k in s}
        y = {k: y[k] + ad * dy[k] for k in s}
    raise RuntimeError(f"structured interior point did not converge in {MAX_IPM_ITERATIONS} iterations")


def _direction(ws, ns, D, s, y, rp, rd, rc, eps, rho, info, max_iter: int = PCG_ITERATIONS):
    """One regularised Newton direction: ``(eps + rho + A'DA) dx = rd - A' D (rc / y - rp)``,
    ``dy = D (A dx + rc / y - rp)``, ``ds = (rc - s dy) / y``."""
    corr = {k: D[k] * (rc[k] / y[k] - rp[k]) for k in s}
    rhs = rd.axpy(-1.0, _AT(ws, corr))
    dx, rel, solves = ns.pcg(D, rhs, eps, rho, max_iter)
    info["solve_residual"] = max(info.get("solve_residual", 0.0), rel)
    info["block_solves"] = info.get("block_solves", 0) + solves
    Adx = _A(ws, dx)
    dy = {k: D[k] * (Adx[k] + rc[k] / y[k] - rp[k]) for k in s}
    ds = {k: (rc[k] - s[k] * dy[k]) / y[k] for k in s}
    return dx, ds, dy


def _b(ws: _WorkingSet) -> dict[str, np.ndarray]:
    q = ws.C.shape[1]
    return {"a": -ws.C.T, "b": ws.C.T.copy(), "up": ws.R_up, "lo": ws.R_lo[ws.two]} if q else {"a": np.zeros((0, len(ws.w))), "b": np.zeros((0, len(ws.w))), "up": ws.R_up, "lo": ws.R_lo[ws.two]}


def _step(v: dict[str, np.ndarray], dv: dict[str, np.ndarray]) -> float:
    """The largest ``alpha`` in (0, 1/0.99] keeping ``v + alpha dv >= 0``."""
    alpha = 1.0 / 0.99
    for k in v:
        neg = dv[k] < 0
        if np.any(neg):
            alpha = min(alpha, float(np.min(-v[k][neg] / dv[k][neg])))
    return alpha


# --- public entry point ---------------------------------------------------------------------------------
def backend_device(device: Any = "cpu") -> Any:
    """The ``torch.device`` on which the Newton step's heavy kernels run, or None for the default path.

    ``"cpu"`` (the string; the default): CPU torch kernels on the numpy arrays' memory. Any other torch device,
    as a name ("cuda", "cuda:1") or a ``torch.device``, runs the torch backend of :class:`_NormalSolver` there;
    ``torch.device("cpu")`` runs that backend on the CPU (how the tests check it without a GPU). Raises
    ValueError, naming the fix, for a name torch does not know or a device it cannot use (no CUDA here,
    a CUDA index beyond the devices, no float64), before any work."""
    import torch

    if isinstance(device, str) and device == "cpu":
        return None
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"rule device {device!r} is not a torch device ({err}); use 'cpu' or 'cuda' (or 'cuda:N')") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"rule device {device!r} asked for, but this torch ({torch.__version__}) sees no CUDA device (built "
            "without CUDA, or no GPU visible): set method.rule_device=cpu, or run on a machine with a GPU"
        )
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"rule device {device!r}: torch sees {torch.cuda.device_count()} CUDA device(s); use cuda:0..")
    try:
        torch.zeros(1, dtype=torch.float64, device=dev)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"rule device {device!r} cannot hold float64 tensors ({err}); use 'cpu' or 'cuda'") from None
    return dev


def solve_robust_lp_reduced(
    family: JointlyLinearFamily,
    weights: np.ndarray,
    threads: int = 1,
    max_rounds: int = 30,
    regularization: float = REGULARIZATION,
    seed_rows: np.ndarray | None = None,
    device: Any = "cpu",
    working_sets: str = "structured",
    exact_optimum: bool = False,
) -> RuleSolution:
    """The robust LP of :func:`~hardlinear.rules.robust_lp.solve_robust_lp` by the structured interior point
    on a sparse elimination; same return type, ``solver = "reduced"``; ``t_star`` is the verified margin over
    every row (float64, chunked). ``seed_rows``: inequality rows to start the row generation with (e.g. the
    ``info["working_set_rows"]`` of the same constraints with aggregated inputs), beside the usual seed.
    ``device``: where the Newton step's heavy kernels run (:func:`backend_device`: "cpu", the default, or
    "cuda"); the elimination, the row generation and the verification stay on the CPU, in float64 everywhere.
    ``working_sets``: "structured" (the interior point above) or "sparse" (:func:`solve_working_set_sparse`).
    Raises ``RuntimeError`` when the interior point fails and
    :class:`~hardlinear.rules.robust_lp.ProgramInfeasible` when ``G F = B_eq`` has no solution."""
    import torch

    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (family.m_ineq,) or np.any(weights <= 0):
        raise ValueError(f"weights must be ({family.m_ineq},) and positive")
    if working_sets not in ("structured", "sparse"):
        raise ValueError(f"working_sets must be 'structured' or 'sparse'; got {working_sets!r}")
    dev = backend_device(device)
    t0 = time.perf_counter()
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    # numpy's BLAS pool too: unbounded, its threads spin against each other on a loaded machine (a 207 x 207 LU
    # took 0.48 s instead of 2 ms at load 16 on 2 cores)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=max(1, threads)):
        try:
            sol = _solve(family, weights, threads, max_rounds, regularization, t0, seed_rows, working_sets, device=dev,
                         exact_optimum=exact_optimum)
            sol.info["device"] = "cpu" if dev is None else ("torch-cpu" if dev.type == "cpu" else str(dev))
            return sol
        finally:
            torch.set_num_threads(previous_threads)


def solve_with_coarse_seed(
    family: JointlyLinearFamily, coarse: JointlyLinearFamily | None, weights: np.ndarray, threads: int = 1,
    min_inputs: int = COARSE_SEED_MIN_INPUTS, device: Any = "cpu",
) -> RuleSolution:
    """:func:`solve_robust_lp_reduced` on ``family``, its row generation seeded with the final working set of
    the rule for ``coarse`` (the same rows with aggregated inputs, e.g. loads by area; skipped when None, not
    coarser, or ``family`` has fewer than ``min_inputs`` inputs, where the first round is cheap anyway).
    ``info["coarse_seed"]`` records the coarse solve (inputs, rows, time, margin)."""
    if coarse is None or coarse.k >= family.k or coarse.m_ineq != family.m_ineq or family.k < min_inputs:
        return solve_robust_lp_reduced(family, weights, threads=threads, device=device)
    t0 = time.perf_counter()
    pre = solve_robust_lp_reduced(coarse, weights, threads=threads, device=device)
    rows = np.asarray(pre.info.get("working_set_rows", []), dtype=int)
    sol = solve_robust_lp_reduced(family, weights, threads=threads, seed_rows=rows, device=device)
    sol.info["coarse_seed"] = {"inputs": int(coarse.k), "rows": int(len(rows)), "t_star": pre.t_star, "time_s": pre.solve_time_s}
    sol.solve_time_s = time.perf_counter() - t0
    return sol


def _solve(
    family: JointlyLinearFamily, weights: np.ndarray, threads: int, max_rounds: int, regularization: float, t0: float,
    seed_rows: np.ndarray | None = None, working_sets: str = "structured", device: Any = None, exact_optimum: bool = False,
) -> RuleSolution:
    """The body of :func:`solve_robust_lp_reduced`, inside its thread limits."""
    sr = reduce_sparse(family, weights)
    red = sr.red
    d, q, E = red.N.shape[1], red.C.shape[1], len(red.upper)
    info: dict[str, Any] = {
        "null_dim": d, "active_inputs": q, "expressions": E, "rounds": 0, "rows_in_lp": 0,
        "rule_unknowns": d * (q + 1), "rule_unknowns_full": family.n * (family.k + 1), "elimination": sr.method,
        "reduce_time_s": time.perf_counter() - t0,
    }
    W = np.zeros((d, q + 1))
    status = "determined"
    if E and d:
        W, S = _rounds(red, regularization, threads, max_rounds, info, seed_rows, working_sets, device=device,
                       exact_optimum=exact_optimum)
        info["working_set_rows"] = rows_of_expressions(red, S).tolist()
        status = "Solved"
    if sr.solve_normal is None:
        from hardlinear.rules.robust_lp import _assemble, _reproject

        F = _reproject(_assemble(red, W, family.B_eq), family.G, family.B_eq, red.pinv)
    else:
        F = _assemble_sparse(sr, W, family)
    margins = verified_row_margins_chunked(F, family.H, family.B_ineq, family.box, weights)
    info["eq_residual"] = float(np.abs(family.G @ F - family.B_eq).max() / (1.0 + np.abs(family.B_eq).max()))
    t_star = float(margins.min()) if margins.size else float("inf")
    return RuleSolution(F, t_star, margins, status, "reduced", time.perf_counter() - t0, info)


def _best_offset(red: _Reduced, spread: np.ndarray, rows: np.ndarray | None = None) -> tuple[np.ndarray, float] | None:
    """``(W_0, t)`` maximising ``t`` for the given spreads ``(E,)`` over the expressions ``rows`` (all by default):
    ``M_e W_0 + w_e t <= R_up_e - spread_e`` and ``-M_e W_0 + w_e t <= R_lo_e - spread_e``; None when HiGHS does
    not solve it. Over every expression with zero spreads its ``t`` bounds the robust LP's optimum from above
    (every spread is nonnegative).

    Written in ``W_0`` this LP is dense (``2 E (d + 1)`` nonzeros: 90 M at case9241_pegase, where HiGHS
    needed >10 GB and did not finish), so when the elimination was sparse (``red.offset_lp``) it is solved in
    the grid's own variables instead: ``y = F_p0 + N W_0`` ranges over ``G y = b_eq0``, and the rows read
    ``H_e y + w_e t <= b_e - spread_e``, a sparse LP of the size of a DC-OPF (:class:`_OffsetLP`)."""
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


@dataclass
class _OffsetLP:
    """The offset LP of :func:`_best_offset` in the original variables: ``max t`` over ``(y: (n,), t)`` s.t.
    ``G y = b_eq0``, ``H_e y + w_e t <= b_up_e - spread_e`` and ``-H_e y + w_e t <= b_lo_e - spread_e`` (``H_e``
    the expression's upper row, ``b`` the inequality right-hand sides at the box's centre), then
    ``W_0 = N' (y - F_p0)``. Its nonzeros are those of ``G`` and of the chosen rows of ``H``."""

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


def _least_squares_rule(red: _Reduced, chunk_rows: int = 8192) -> np.ndarray:
    """``W: (d, q + 1)``: the columns ``W_j`` minimising ``sum_e (M_e W_j + C_ej)^2 / w_e^2`` (the spreads in least
    squares), by the normal equations accumulated over chunks of expressions with a ``1e-12`` relative ridge (the
    minimum-norm solution where ``M`` is rank-deficient, up to that ridge); ``W_0 = 0``. ``O(d^2)`` memory where
    :func:`numpy.linalg.lstsq` (an SVD of the weighted ``M``) needs copies of ``M`` and its time (at case9241_pegase
    ``E = 31,701``, ``d = 1,444``)."""
    E, d = red.M.shape
    q = red.C.shape[1]
    W = np.zeros((d, q + 1))
    if not q or not d:
        return W
    gram, rhs = np.zeros((d, d)), np.zeros((d, q))
    for s in range(0, E, chunk_rows):
        Mw = red.M[s : s + chunk_rows] / red.w[s : s + chunk_rows, None]
        gram += Mw.T @ Mw
        rhs += Mw.T @ (red.C[s : s + chunk_rows] / red.w[s : s + chunk_rows, None])
    ridge = 1e-12 * max(float(np.trace(gram)) / d, 1e-300)
    gram[np.diag_indices(d)] += ridge
    from scipy.linalg import cho_factor, cho_solve

    W[:, 1:] = -cho_solve(cho_factor(gram, check_finite=False), rhs, check_finite=False)
    return W


def _seed_rule(red: _Reduced, n_range: int = 20, n_ls: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """``(expressions, W)``: the seed of :func:`~hardlinear.rules.robust_lp._seed` (the ``n_range`` smallest
    half-ranges and the ``max(n_ls, d)`` worst expressions of the least-squares rule with its best offset) in
    ``O(E d)`` memory, and that rule (checked against the zero-spread bound before any interior-point step)."""
    E, d = red.M.shape
    halfrange = np.where(red.lower >= 0, (red.R_up + red.R_lo) / 2, red.R_up) / red.w
    W = _least_squares_rule(red)
    spread = np.abs(red.M @ W[:, 1:] + red.C).sum(axis=1) if red.C.shape[1] else np.zeros(E)
    best = _best_offset(red, spread)
    if best is not None:
        W[:, 0] = best[0]
    margins = _expression_margins(red, W)
    seed = np.concatenate([np.argsort(halfrange)[:n_range], np.argsort(margins)[: max(n_ls, min(d, WORKING_SET_STEP))]])
    return np.unique(seed), W


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


def solve_working_set_sparse(red: _Reduced, S: np.ndarray, regularization: float, threads: int) -> tuple[np.ndarray, float, dict[str, Any]]:
    """The working-set LP in the grid's own variables, by Clarabel: ``(W: (d, q + 1), t, info)``.

    The rule's columns ``y_j = F_p,j + N W_j`` (``j = 0..q``, u-coordinates) are the unknowns, with
    ``G y_j = B_eq,j``; an expression's input coefficients are ``a_ej = H_e y_j - B_e,j`` (``= M_e W_j + C_ej``),
    ``|a_ej| <= V+_ej + V-_ej``, and its rows ``+-H_e y_0 + spread_e + w_e t <= b_e``. Every row is as sparse as
    the grid (no ``N``, no ``M``), so a working set larger than ``d`` costs what its rows' nonzeros cost, where the
    structured interior point's blocks are ``d x d`` per input (``d = 4,091`` at case13659_pegase). The proximal
    term ``(eps/2) ||y_j||^2`` has the minimiser of ``(eps/2) ||W_j||^2`` (``y_j - F_p,j`` is orthogonal to the
    min-norm ``F_p,j``); ``W = N' (y - F_p)``."""
    from hardlinear.rules.robust_lp import _solve_clarabel, _solve_highs

    lp_data: _OffsetLP = red.offset_lp
    G = lp_data.G
    m, n = G.shape
    q = red.C.shape[1]
    E = len(S)
    two = red.lower[S] >= 0
    Hs = lp_data.H_upper[S]
    ny = n * (q + 1)
    nv = ny + 2 * E * q + E + 1
    blocks = sp.block_diag([G] * (q + 1), format="csr")
    eq_G = sp.hstack([blocks, sp.csr_matrix((m * (q + 1), nv - ny))])
    IEq = sp.identity(E * q, format="csr")
    abs_rows = sp.hstack([sp.csr_matrix((E * q, n)), sp.block_diag([Hs] * q, format="csr"), -IEq, IEq, sp.csr_matrix((E * q, E + 1))]) if q else sp.csr_matrix((0, nv))
    summ = sp.kron(np.ones((1, q)), sp.identity(E, format="csr"))
    spread_rows = sp.hstack([sp.csr_matrix((E, ny)), -summ, -summ, sp.identity(E), sp.csr_matrix((E, 1))])
    Aeq = sp.vstack([eq_G, abs_rows, spread_rows]).tocsr()
    beq = np.concatenate([lp_data.b_eq0, lp_data.B_eq_active.T.reshape(-1), lp_data.B_up_active[S].T.reshape(-1), np.zeros(E)])
    gap = sp.csr_matrix((E, ny - n + 2 * E * q))
    w = red.w[S]
    Ain = sp.vstack([
        sp.hstack([Hs, gap, sp.identity(E), sp.csr_matrix(w[:, None])]),
        sp.hstack([-Hs[two], gap[two], sp.identity(E, format="csr")[two], sp.csr_matrix(w[two][:, None])]),
    ]).tocsr()
    bin_ = np.concatenate([lp_data.b_up[S], lp_data.b_lo[S][two]])
    scale = max(1.0, float(np.abs(beq).max(initial=0)), float(np.abs(bin_).max(initial=0)))
    lp = {"Aeq": Aeq, "beq": beq, "Ain": Ain, "bin": bin_, "nonneg": np.arange(ny, ny + 2 * E * q), "nv": nv, "nW": ny, "t": nv - 1}
    tic = time.perf_counter()
    failures = []
    for solver in SPARSE_LP_SOLVERS:
        try:
            if solver == "clarabel":
                z, status = _solve_clarabel(lp, regularization * scale, threads)
            else:  # interior point without crossover: no proximal term, any optimal rule
                z, status = _solve_highs(lp, threads, "ipx")
            break
        except RuntimeError as err:  # e.g. Clarabel's NumericalError at case9241_pegase, 1,179 expressions
            failures.append(f"{solver}: {err}")
            log.warning("sparse working-set LP (%d expressions): %s; trying the next solver", E, err)
    else:
        raise RuntimeError("every solver failed on the sparse working-set LP: " + "; ".join(failures))
    Y = z[:ny].reshape(q + 1, n).T  # (n, q + 1)
    cols = np.concatenate([[0], red.active])
    W = red.N.T @ (Y - red.Fp[:, cols])
    return W, float(z[nv - 1]), {"status": f"{solver}: {status}", "failures": failures, "time_s": time.perf_counter() - tic, "variables": nv, "nnz": int(Aeq.nnz + Ain.nnz)}


def _working_set(red: _Reduced, S: np.ndarray) -> tuple[_WorkingSet, np.ndarray | None]:
    """The working-set LP of the expressions ``S``, and the basis it is written in.

    Only ``M_S W_j`` enters the working set's LP, and the proximal term ``(eps/2) ||W||^2`` makes every
    component of ``W_j`` in the null space of ``M_S`` zero: with ``|S| < d`` the LP is written in
    ``W_j = Q Z_j`` for an orthonormal basis ``Q: (d, |S|)`` of the rows' span (``M_S' = Q R``, so ``M_S Q = R'``),
    the same LP and the same minimiser with ``|S|`` instead of ``d`` unknowns per column (its blocks are
    ``|S| x |S|``: at case13659_pegase ``d = 4,091``). Returns ``(ws, Q)``, ``Q`` None when ``|S| >= d``."""
    M = red.M[S]
    basis = None
    if len(S) < M.shape[1]:
        basis, R = np.linalg.qr(M.T)
        M = np.ascontiguousarray(R.T)
    return _WorkingSet(M, red.C[S], red.R_up[S], red.R_lo[S], red.w[S], red.lower[S] >= 0), basis


def _full_rule(x: _Point, basis: np.ndarray | None, q: int) -> np.ndarray:
    """``W: (d, q + 1)`` of an iterate of the working-set LP written in ``basis`` (:func:`_working_set`)."""
    W = np.column_stack([x.W0, x.W.T]) if q else x.W0[:, None]
    return W if basis is None else basis @ W


def sparse_working_set(red: _Reduced, working_sets: str) -> bool:
    """Whether :func:`_rounds` solves its working sets in the grid's variables (:func:`solve_working_set_sparse`,
    ``working_sets="sparse"``, needs the sparse elimination) rather than by the structured interior point
    (``"structured"``, the default). Measured (one thread, load 4-5): case6470_rte with one area input, 33-37 s in
    all against 23 s structured; case9241_pegase with 24 zones, HiGHS's first round (520 expressions) 25 s
    against 16 s, its rule violating 8,206 rows outside the set (the structured rule: 672), and its second
    (2,520 expressions) not done after 5 min; Clarabel 117 s on the first, NumericalError on the second. Kept as
    an option: its cost does not grow with ``d``."""
    if working_sets not in ("structured", "sparse"):
        raise ValueError(f"working_sets must be 'structured' or 'sparse'; got {working_sets!r}")
    if working_sets == "sparse" and getattr(red, "offset_lp", None) is None:
        raise ValueError("working_sets='sparse' needs the sparse elimination (G with independent rows)")
    return working_sets == "sparse"


def _rounds_sparse(red: _Reduced, S: np.ndarray, regularization: float, threads: int, max_rounds: int, info: dict[str, Any], certify) -> tuple[np.ndarray, np.ndarray]:
    """The rounds of :func:`_rounds` with every working set solved to optimality in the grid's variables
    (:func:`solve_working_set_sparse`); each round adds up to ``SPARSE_STEP`` of the most violated expressions."""
    tolerance = lambda t: ROW_TOLERANCE * max(1.0, abs(t))  # noqa: E731
    info["working_set_solver"] = "sparse"
    for rounds in range(1, max_rounds + 1):
        W, t_ws, lp_info = solve_working_set_sparse(red, S, regularization, threads)
        info["sparse_lp_time_s"] = info.get("sparse_lp_time_s", 0.0) + lp_info["time_s"]
        info.setdefault("sparse_lp_status", []).append(lp_info["status"])
        margins = _expression_margins(red, W)
        info.update(rounds=rounds, rows_in_lp=int(len(S)), t_working_set=float(t_ws), ipm_iterations=0)
        done = certify(W, margins, t_ws)
        if done is not None:
            info["certified"] = "zero-spread bound"
            log.debug("reduced robust LP (sparse) round %d: %d expressions, margin %.10g certified, %.1f s", rounds, len(S), done[1], lp_info["time_s"])
            return done[0], S
        below = np.flatnonzero(margins < t_ws - tolerance(t_ws))
        fresh = below[~np.isin(below, S)]
        log.debug(
            "reduced robust LP (sparse) round %d: %d of %d expressions, t=%.10g, rule's margin %.6g, %d rows below, %.1f s (%d variables)",
            rounds, len(S), len(red.w), t_ws, float(margins.min()), len(fresh), lp_info["time_s"], lp_info["variables"],
        )
        if fresh.size == 0:
            return _polished(red, W, margins), S
        S = np.concatenate([S, fresh[np.argsort(margins[fresh])][:SPARSE_STEP]])
    raise RuntimeError(f"row generation did not converge in {max_rounds} rounds")


def _rounds(
    red: _Reduced, regularization: float, threads: int, max_rounds: int, info: dict[str, Any], seed_rows: np.ndarray | None = None,
    working_sets: str = "structured",
    device: Any = None,
    exact_optimum: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Row generation around :func:`solve_working_set`; returns ``(W: (d, q + 1), the final working set)``.

    The first working set is :func:`~hardlinear.rules.robust_lp._seed`'s plus the expressions of ``seed_rows``
    (inequality rows, e.g. the final working set of the same grid with aggregated inputs). A round stops at
    its first iterate that violates rows outside the set (``PROBE_GAP``), or once the iterate's rule, its offset
    re-optimised over every expression (:func:`_best_offset`), reaches the zero-spread bound on ``t*``
    (certified optimal); otherwise the last round, which finds no such row, runs to ``IPM_TOL``."""
    d, q, E = red.N.shape[1], red.C.shape[1], len(red.upper)
    tic = time.perf_counter()
    S, W_seed = _seed_rule(red)
    info["seed_time_s"] = time.perf_counter() - tic
    if seed_rows is not None and len(seed_rows):
        S = np.unique(np.concatenate([S, expressions_of_rows(red, seed_rows)]))
    info["seed_expressions"] = int(len(S))
    tolerance = lambda t: ROW_TOLERANCE * max(1.0, abs(t))  # noqa: E731
    # every spread is >= 0, so the margin with zero spreads bounds t* from above: a rule whose verified margin
    # over every expression reaches it is optimal, whatever the working set (then the rounds stop)
    tic = time.perf_counter()
    upper = _best_offset(red, np.zeros(E))
    info["zero_spread_bound_time_s"] = time.perf_counter() - tic
    t_upper = upper[1] if upper is not None else np.inf
    info["t_upper_zero_spread"] = float(t_upper)
    bound = t_upper - CERTIFY_GAP * max(abs(t_upper), 1e-12)

    def certify(W: np.ndarray, margins: np.ndarray, t: float) -> tuple[np.ndarray, float] | None:
        """``(rule, margin)`` when ``W`` (or ``W`` with its offset re-optimised on the expressions nearest to
        binding, once ``t`` is within ``POLISH_WINDOW`` of the bound) reaches the bound over every expression."""
        if not np.isfinite(t_upper):
            return None
        if margins.min() >= bound:  # the rule itself reaches the bound over every expression
            return W, float(margins.min())
        if t >= t_upper - POLISH_WINDOW * max(abs(t_upper), 1e-12):
            # the rule's spreads with the best offset on the expressions nearest to binding (an LP in d + 1
            # unknowns), then verified on every expression
            spread = np.abs(red.M @ W[:, 1:] + red.C).sum(axis=1) if q else np.zeros(E)
            near = np.argsort(margins)[: max(POLISH_ROWS, 4 * (d + 1))]
            best = _best_offset(red, spread, near)
            if best is not None:
                polished = W.copy()
                polished[:, 0] = best[0]
                margin = float(_expression_margins(red, polished).min())
                if margin >= bound:
                    return polished, margin
        return None

    # the least-squares rule with its best offset can already be optimal (then no interior-point step runs)
    seed_margins = _expression_margins(red, W_seed)
    info["seed_margin"] = float(seed_margins.min())
    log.debug(
        "reduced robust LP setup: seed %d expressions in %.1f s (least-squares rule's margin %.6g), zero-spread bound %.10g in %.1f s",
        len(S), info["seed_time_s"], info["seed_margin"], t_upper, info["zero_spread_bound_time_s"],
    )
    if seed_margins.min() >= bound:
        info.update(rounds=0, rows_in_lp=0, t_working_set=float(t_upper), ipm_iterations=0, certified="zero-spread bound (least-squares seed rule)")
        log.debug("reduced robust LP: the least-squares seed rule's margin %.10g reaches the zero-spread bound %.10g", seed_margins.min(), t_upper)
        return W_seed, S
    if sparse_working_set(red, working_sets):
        return _rounds_sparse(red, S, regularization, threads, max_rounds, info, certify)
    ipm_total = 0
    for rounds in range(1, max_rounds + 1):
        ws, basis = _working_set(red, S)
        t_round = time.perf_counter()
        found: dict[str, np.ndarray] = {}

        def probe(x: _Point, t: float, S=S, found=found, basis=basis) -> bool:
            W = _full_rule(x, basis, q)
            margins = _expression_margins(red, W)
            below = np.flatnonzero(margins < t - tolerance(t))
            fresh = below[~np.isin(below, S)]
            if fresh.size:
                found["fresh"], found["margins"] = fresh, margins
                return True
            done = certify(W, margins, t)
            if done is not None:
                found["certified"], found["margin"] = done
                return True
            return False

        x, t_ws, ipm = solve_working_set(ws, regularization, threads, probe=probe, device=device)
        ipm_total += ipm["ipm_iterations"]
        for key in ("block_solves", "regularised_steps"):
            info[key] = info.get(key, 0) + ipm.get(key, 0)
        for key, value in ipm.get("timers_s", {}).items():
            info.setdefault("timers_s", {})[key] = info.get("timers_s", {}).get(key, 0.0) + value
        W = _full_rule(x, basis, q)
        if "certified" in found:
            info.update(rounds=rounds, rows_in_lp=int(len(S)), t_working_set=float(t_upper), ipm_iterations=ipm_total)
            info.update(ipm_gap=float(ipm["gap"]), ipm_stalled=False, certified="zero-spread bound")
            log.debug(
                "reduced robust LP round %d: %d of %d expressions, margin %.10g certified optimal (zero-spread bound "
                "%.10g) after %d steps, %.1f s", rounds, len(S), E, found["margin"], t_upper, ipm["ipm_iterations"],
                time.perf_counter() - t_round,
            )
            return found["certified"], S
        if ipm.get("probed"):
            fresh, margins = found["fresh"], found["margins"]
        else:
            info["ipm_gap"] = float(ipm["gap"])  # the final working set's optimum is within this
            info["ipm_stalled"] = bool(ipm.get("stalled", False))
            margins = _expression_margins(red, W)
            below = np.flatnonzero(margins < t_ws - tolerance(t_ws))
            fresh = below[~np.isin(below, S)]
        info.update(rounds=rounds, rows_in_lp=int(len(S)), t_working_set=float(t_ws), ipm_iterations=ipm_total)
        log.debug(
            "reduced robust LP round %d: %d of %d expressions, t=%.8g, rule's margin %.6g, %d rows below, %d steps%s, %.1f s",
            rounds, len(S), E, t_ws, float(margins.min()), len(fresh), ipm["ipm_iterations"],
            " (stopped early)" if ipm.get("probed") else "", time.perf_counter() - t_round,
        )
        if fresh.size == 0:
            share = _proximal_share(x, ipm["eps"], t_ws)
            info["proximal_share"] = share
            resolves = info.get("proximal_resolves", 0)
            if share > PROXIMAL_SHARE and exact_optimum and resolves < PROXIMAL_RESOLVES:
                # the regularised optimum trades margin for a smaller rule: solve this working set again with eps
                # small enough that the term weighs PROXIMAL_SHARE of t at this rule's size
                info["proximal_resolves"] = resolves + 1
                log.info(
                    "reduced robust LP round %d: proximal term %.2g of t=%.6g; re-solving with eps %.2g -> %.2g",
                    rounds, share, t_ws, regularization, regularization * PROXIMAL_SHARE / share,
                )
                regularization *= PROXIMAL_SHARE / share
                continue
            if share > PROXIMAL_SHARE:
                log.warning(
                    "reduced robust LP: the proximal term (eps/2)||W||^2 is %.2g of t = %.6g after %d re-solves, so the "
                    "rule's margin may be below the LP's optimum (at case9241_pegase a share of 0.082 cost 2.3 %%); "
                    "rule_solver=sparse solves the LP exactly where it fits, and exact_optimum=True re-solves with eps "
                    "shrunk (slow)", share, t_ws, resolves,
                )
            return _polished(red, W, margins), S
        S = np.concatenate([S, fresh[np.argsort(margins[fresh])][: max(50, min(d, WORKING_SET_STEP))]])
    raise RuntimeError(f"row generation did not converge in {max_rounds} rounds")


def _proximal_share(x: _Point, eps: float, t: float) -> float:
    """``(eps/2) ||(W0, W)||^2 / |t|``: how much of the working set's objective is the proximal term (``t``
    floored at 1e-12: a zero margin has no relative scale)."""
    penalty = 0.5 * eps * (float(x.W0 @ x.W0) + float(np.sum(x.W * x.W)))
    return penalty / max(abs(t), 1e-12)


def expressions_of_rows(red: _Reduced, rows: np.ndarray) -> np.ndarray:
    """The expressions (positions in ``red.upper``) that hold the given inequality rows (upper or lower)."""
    m = int(max(red.upper.max(initial=-1), red.lower.max(initial=-1))) + 1
    owner = np.full(m, -1)
    owner[red.upper] = np.arange(len(red.upper))
    two = red.lower >= 0
    owner[red.lower[two]] = np.flatnonzero(two)
    rows = np.asarray(rows, dtype=int)
    rows = rows[(rows >= 0) & (rows < m)]
    found = owner[rows]
    return np.unique(found[found >= 0])


def rows_of_expressions(red: _Reduced, S: np.ndarray) -> np.ndarray:
    """The inequality rows (upper and, where there is one, lower) of the expressions ``S``."""
    lower = red.lower[S]
    return np.unique(np.concatenate([red.upper[S], lower[lower >= 0]]))
