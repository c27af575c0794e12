"""The robust LP of :mod:`hardlinear.rules.robust_lp`, whole, in the grid's own sparse variables.

Same program, same verified margin: ``max t`` over rules ``y = F x`` with ``G F = B_eq`` and every row's worst
case over the box at least ``w_i t``. Where the other solvers eliminate the equalities (a dense null-space basis:
every robust row becomes dense in it) and generate rows, this one keeps ``G`` and ``H`` sparse and writes every
row at once. In u-coordinates (``xi = mid + radius u``, ``u in [-1, 1]^q`` over the ``q`` inputs that move a
right-hand side) with ``y_j`` the rule's column ``j`` and ``s_j >= |H_e y_j - B_ej|`` its spread on expression
``e`` (an upper row and, where there is one, its opposite lower row)::

    max t   s.t.   G y_j = B_eq,j                          j = 0..q
                   -s_j <= H_e y_j - B_ej <= s_j           j = 1..q, every expression e
                    H_e y_0 + sum_j s_ej + w_e t <= b_up_e  (and  -H_e y_0 + ... <= b_lo_e)

Its nonzeros are ``(q + 1) nnz(G) + 2 q (nnz(H_u) + E) + ...``: linear in the grid for a fixed number of
inputs, so with loads aggregated by zone or area it is a few DC-OPFs' worth of LP that HiGHS's interior point
(IPX, no crossover) solves directly: no elimination, no working set, no rounds. With every load an input the
nonzeros grow as ``inputs x grid`` (60 M at case2000_goc's 1,010 loads) and the structured row generation of
:mod:`~hardlinear.rules.reduced` is the better tool; ``solver="auto"`` chooses by a cost model
(:mod:`hardlinear.rules.solver_choice`: :func:`sparse_lp_nonzeros` is this solver's size) and never past
``SPARSE_MAX_NONZEROS``.

After solving, the rule is mapped back to x-coordinates, corrected once onto ``G F = B_eq`` (one sparse LU of
``G G'``) and verified row by row in float64 (:func:`~hardlinear.rules.reduced.verified_row_margins_chunked`):
``t_star`` is that verified margin, never the solver's ``t``. Measured (benchmarks/README.md, 1 thread):
case2000_goc (3 areas) 3.5 s, case6470_rte (1 area) 5 s, case9241_pegase (1 area) 27 s, case13659_pegase
(1 area) 60 s, each under 0.6 GB.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from hardlinear.constraints.family import JointlyLinearFamily
from hardlinear.rules.reduced import verified_row_margins_chunked
from hardlinear.rules.reduced.elimination import _u_coordinates
from hardlinear.rules.robust_lp import ProgramInfeasible, ProgramUnbounded, RuleSolution, find_expression_pairs
from hardlinear.rules.sparse_elimination import normal_lu

log = logging.getLogger(__name__)


class SparseSolveFailed(RuntimeError):
    """HiGHS stopped on the sparse LP without an optimum (status ``Unknown``, a limit): ``rule_solver=auto`` then
    falls back to the reduced solver (case2869_pegase with inputs by zone, benchmarks/README.md, issue 42)."""


# solver="auto" never hands this solver an LP of more nonzeros than this by sparse_lp_nonzeros (an overestimate,
# ~1.7x): its memory. Measured, 1 thread: one area
# at case13659_pegase (estimate 1.2 M, built 0.72 M) 69 s and 0.6 GB; 24 zones at case9241_pegase (estimate 12.8 M)
# had not finished after 26 min (22 min of CPU, 3.2 GB) and was stopped.
SPARSE_MAX_NONZEROS = 5_000_000
# HiGHS's interior-point optimality tolerance (relative primal-dual gap); the verified margin is reported anyway.
IPM_TOLERANCE = 1e-9


def _active_inputs(family: JointlyLinearFamily) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(B_eq, B_ineq, active)``: the right-hand sides in u-coordinates and the columns (1-based) of the inputs
    that move some right-hand side over a box of positive radius (the others keep the min-norm column)."""
    Beq = _u_coordinates(family.B_eq, family.box)
    Bin = _u_coordinates(family.B_ineq, family.box)
    moves = np.any(Beq[:, 1:] != 0, axis=0) | np.any(Bin[:, 1:] != 0, axis=0)
    return Beq, Bin, 1 + np.flatnonzero(moves & (family.box.radius > 0))


def sparse_lp_nonzeros(family: JointlyLinearFamily) -> int:
    """The constraint matrix's nonzeros of this solver's LP for ``family``, from the data alone (an upper bound:
    every row is counted as an expression), so that ``solver="auto"`` can choose before building anything."""
    _, _, active = _active_inputs(family)
    q = len(active)
    G, H = sp.csr_matrix(family.G), sp.csr_matrix(family.H)
    m_ineq = H.shape[0]
    return int((q + 1) * G.nnz + 2 * q * (H.nnz + m_ineq) + 2 * (H.nnz + (q + 1) * m_ineq))


def _assemble_lp(G: sp.csr_matrix, Hu: sp.csr_matrix, w: np.ndarray, b_up: np.ndarray, b_lo: np.ndarray,
                 two: np.ndarray, Beq: np.ndarray, Bup: np.ndarray, scaling: bool = False) -> tuple[sp.csc_matrix, np.ndarray, np.ndarray]:
    """``(A, row_lower, row_upper)`` of the LP in the module docstring; columns ``(y_0..y_q, s_1..s_q, t)``.
    ``scaling``: the level LP of :func:`max_uncertainty_scaling_sparse` instead, whose last column is
    ``sigma = 1 / kappa`` and whose ``y_0`` is the scaled offset ``sigma y_0`` (``G y_0 = sigma b_eq0`` and
    ``H_e y_0 + sum_j s_ej <= sigma b_up_e``)."""
    m, n = G.shape
    E, q = Bup.shape
    ns = E * q
    inf = np.inf

    def zeros(r: int, c: int) -> sp.csr_matrix:
        return sp.csr_matrix((r, c))

    last_eq = np.zeros(m * (q + 1))
    rhs = Beq.T.ravel().copy()
    if scaling:  # G y_0 - sigma b_eq0 = 0
        last_eq[:m], rhs[:m] = -Beq[:, 0], 0.0
    blocks = [sp.hstack([sp.kron(sp.eye(q + 1), G), zeros(m * (q + 1), ns), sp.csr_matrix(last_eq[:, None])])]
    lower, upper = [rhs], [rhs]
    if q:
        HY = sp.hstack([zeros(ns, n), sp.kron(sp.eye(q), Hu)])
        S = sp.eye(ns)
        blocks += [sp.hstack([HY, -S, zeros(ns, 1)]), sp.hstack([-HY, -S, zeros(ns, 1)])]
        lower += [np.full(ns, -inf), np.full(ns, -inf)]
        upper += [Bup.T.ravel(), -Bup.T.ravel()]
    spread = sp.csr_matrix(sp.hstack([sp.eye(E)] * q)) if q else zeros(E, 0)
    # the margin LP: + w_e t <= b; the level LP: - sigma b <= 0
    col_up = sp.csr_matrix((-b_up if scaling else w)[:, None])
    col_lo = sp.csr_matrix((-b_lo[two] if scaling else w[two])[:, None])
    blocks += [
        sp.hstack([Hu, zeros(E, n * q), spread, col_up]),
        sp.hstack([-Hu[two], zeros(len(two), n * q), spread[two], col_lo]),
    ]
    lower += [np.full(E, -inf), np.full(len(two), -inf)]
    upper += [np.zeros(E), np.zeros(len(two))] if scaling else [b_up, b_lo[two]]
    return sp.vstack(blocks).tocsc(), np.concatenate(lower), np.concatenate(upper)


def _run_highs(A: sp.csc_matrix, row_lower: np.ndarray, row_upper: np.ndarray, n_free: int, n_spread: int,
               threads: int, tolerance: float, last_cost: float = -1.0) -> tuple[np.ndarray, str, dict[str, Any]]:
    """Optimise the last column (``max t``: cost -1; ``min sigma``: +1) with HiGHS IPX, crossover off;
    ``(x, model status, info)``."""
    import highspy

    from hardlinear.solvers.highs import quiet_highs

    nv = A.shape[1]
    inf = highspy.kHighsInf
    model = highspy.HighsLp()
    model.num_col_, model.num_row_ = nv, A.shape[0]
    cost = np.zeros(nv)
    cost[-1] = last_cost
    col_lower = np.full(nv, -inf)
    col_lower[n_free : n_free + n_spread] = 0.0
    model.col_cost_, model.col_lower_, model.col_upper_ = cost, col_lower, np.full(nv, inf)
    model.row_lower_ = np.where(np.isfinite(row_lower), row_lower, -inf)
    model.row_upper_ = np.where(np.isfinite(row_upper), row_upper, inf)
    model.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    model.a_matrix_.start_, model.a_matrix_.index_, model.a_matrix_.value_ = A.indptr, A.indices, A.data
    h = quiet_highs()
    h.setOptionValue("threads", max(1, threads))
    h.setOptionValue("solver", "ipm")
    h.setOptionValue("run_crossover", "off")
    h.setOptionValue("ipm_optimality_tolerance", tolerance)
    h.passModel(model)
    h.run()
    status = h.modelStatusToString(h.getModelStatus())
    hinfo = h.getInfo()
    info = {"ipm_iterations": int(hinfo.ipm_iteration_count), "lp_objective": float(hinfo.objective_function_value)}
    gap = getattr(hinfo, "primal_dual_objective_error", None)
    if gap is not None:
        info["lp_primal_dual_error"] = float(gap)
    return np.asarray(h.getSolution().col_value), status, info


@dataclass
class _LPData:
    """The right-hand sides of the LP in u-coordinates: ``Beq`` on the offset and the moving inputs' columns,
    the expressions (``upper`` rows, ``two``: those with a lower row) and their nominal bounds ``b_up``, ``b_lo``
    (``inf`` for a lone row), ``Bup`` the upper rows' input columns."""

    active: np.ndarray
    upper: np.ndarray
    two: np.ndarray
    Beq: np.ndarray
    Bup: np.ndarray
    b_up: np.ndarray
    b_lo: np.ndarray

    @classmethod
    def of(cls, family: JointlyLinearFamily) -> _LPData:
        Beq, Bin, active = _active_inputs(family)
        upper, lower = find_expression_pairs(sp.csr_matrix(family.H), Bin[:, active])
        two = np.flatnonzero(lower >= 0)
        b_lo = np.full(len(upper), np.inf)
        b_lo[two] = Bin[lower[two], 0]
        cols = np.concatenate([[0], active])
        return cls(active, upper, two, Beq[:, cols], Bin[upper][:, active], Bin[upper, 0], b_lo)


def max_uncertainty_scaling_sparse(family: JointlyLinearFamily, threads: int = 1, tolerance: float = IPM_TOLERANCE) -> tuple[float, dict[str, Any]]:
    """The largest factor ``kappa`` by which the box's radius can be scaled with a rule of margin ``t >= 0``
    still existing (:func:`~hardlinear.rules.robust_lp.max_uncertainty_scaling`'s program: minimise
    ``sigma = 1 / kappa`` over the scaled offset and the input columns), as one sparse LP in the grid's variables.
    Returns the scale that the LP's rule certifies over every expression (``min_e`` nominal slack / spread, in
    float64; at most the LP's own ``1 / sigma``, ``info["kappa_lp"]``), ``inf`` when nothing needs to shrink."""
    t0 = time.perf_counter()
    G, H = sp.csr_matrix(family.G), sp.csr_matrix(family.H)
    n = G.shape[1]
    data = _LPData.of(family)
    q, E = len(data.active), len(data.upper)
    info: dict[str, Any] = {"active_inputs": q, "expressions": E, "rounds": 1}
    if q == 0 or E == 0:
        return float("inf"), {**info, "solve_time_s": time.perf_counter() - t0}
    Hu = H[data.upper]
    A, row_lower, row_upper = _assemble_lp(G, Hu, np.ones(E), data.b_up, data.b_lo, data.two, data.Beq, data.Bup, scaling=True)
    x, status, lp_info = _run_highs(A, row_lower, row_upper, n * (q + 1), E * q, threads, tolerance, last_cost=1.0)
    info.update(lp_info, status=status, nnz=int(A.nnz))
    if status == "Infeasible":
        raise ProgramInfeasible("the rule's equalities G F = B_eq have no solution (HiGHS: infeasible)")
    if status != "Optimal":
        raise RuntimeError(f"HiGHS ended the sparse level LP with status {status!r}")
    sigma = float(x[-1])
    info["kappa_lp"] = 1.0 / sigma if sigma > 0 else float("inf")
    Y = x[: n * (q + 1)].reshape(q + 1, n).T
    if sigma <= 0:
        info["solve_time_s"] = time.perf_counter() - t0
        return float("inf"), info
    offset = Hu @ (Y[:, 0] / sigma)
    spread = np.abs(np.asarray(Hu @ Y[:, 1:]) - data.Bup).sum(axis=1)
    slack = np.minimum(data.b_up - offset, data.b_lo + offset)  # inf - ... for lone rows: the upper one decides
    with np.errstate(divide="ignore", invalid="ignore"):
        limit = np.where(spread > 0, slack / spread, np.where(slack >= 0, np.inf, 0.0))
    info["solve_time_s"] = time.perf_counter() - t0
    return float(max(0.0, limit.min())), info


def solve_robust_lp_sparse(
    family: JointlyLinearFamily, weights: np.ndarray, threads: int = 1, tolerance: float = IPM_TOLERANCE
) -> RuleSolution:
    """The margin rule of ``family`` over its box by one sparse LP (module docstring); ``solver = "sparse"``,
    ``t_star`` the verified margin over every row. Raises :class:`~hardlinear.rules.robust_lp.ProgramInfeasible`
    when ``G F = B_eq`` has no solution, :class:`~hardlinear.rules.robust_lp.ProgramUnbounded` when the margin
    is unbounded (use ``solver="clarabel"``, which caps it) and ``RuntimeError`` when HiGHS ends otherwise."""
    t0 = time.perf_counter()
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (family.m_ineq,) or np.any(weights <= 0):
        raise ValueError(f"weights must be ({family.m_ineq},) and positive")
    G, H, box = sp.csr_matrix(family.G), sp.csr_matrix(family.H), family.box
    n = G.shape[1]
    data = _LPData.of(family)
    active, upper, q = data.active, data.upper, len(data.active)
    A, row_lower, row_upper = _assemble_lp(G, H[upper], weights[upper], data.b_up, data.b_lo, data.two, data.Beq, data.Bup)
    build_s = time.perf_counter() - t0
    log.info(
        "sparse robust LP: %d inputs, %d expressions, %d x %d, %d nonzeros (built in %.1f s); HiGHS IPX",
        q, len(upper), A.shape[0], A.shape[1], A.nnz, build_s,
    )
    from hardlinear.rules.progress import report

    report(f"HiGHS IPX on the sparse LP ({A.shape[0]} x {A.shape[1]}, {A.nnz} nonzeros, built in {build_s:.1f} s)")
    x, status, info = _run_highs(A, row_lower, row_upper, n * (q + 1), len(upper) * q, threads, tolerance)
    if status == "Infeasible":
        raise ProgramInfeasible("the rule's equalities G F = B_eq have no solution (HiGHS: infeasible)")
    if status in ("Unbounded", "Primal infeasible or unbounded"):
        raise ProgramUnbounded("the margin is unbounded; rule_solver='clarabel' caps it (max_margin)")
    if status != "Optimal":
        raise SparseSolveFailed(f"HiGHS ended the sparse robust LP with status {status!r}; try rule_solver='reduced'")
    F = _rule_from_solution(x[: n * (q + 1)].reshape(q + 1, n).T, active, family, G)
    margins = verified_row_margins_chunked(F, H, family.B_ineq, box, weights)
    info.update(
        expressions=len(upper), active_inputs=q, rounds=1, rows_in_lp=int(H.shape[0]), t_lp=float(x[-1]),
        n_variables=int(A.shape[1]), n_constraints=int(A.shape[0]), nnz=int(A.nnz), build_time_s=build_s,
        rule_unknowns=n * (q + 1), rule_unknowns_full=n * (family.k + 1),
        eq_residual=float(np.abs(G @ F - family.B_eq).max() / (1.0 + np.abs(family.B_eq).max())),
    )
    t_star = float(margins.min()) if margins.size else float("inf")
    return RuleSolution(F, t_star, margins, "Solved", "sparse", time.perf_counter() - t0, info)


def _rule_from_solution(Yu: np.ndarray, active: np.ndarray, family: JointlyLinearFamily, G: sp.csr_matrix) -> np.ndarray:
    """``F: (n, k + 1)`` in x-coordinates from the LP's columns ``Yu: (n, q + 1)`` (u-coordinates); inputs that
    move nothing keep a zero column, zero-radius inputs the min-norm solution of theirs; then one least-squares
    correction ``F -= G' (G G')^{-1} (G F - B_eq)`` that removes the interior point's residual."""
    box = family.box
    n = G.shape[1]
    F = np.zeros((n, family.k + 1))
    F[:, active] = Yu[:, 1:] / box.radius[active - 1]
    F[:, 0] = Yu[:, 0] - F[:, 1:] @ box.mid
    lu = normal_lu(G) if G.shape[0] else None
    if lu is None:  # dependent equality rows: keep the interior point's own (primal-feasible) columns
        return F
    fixed = 1 + np.flatnonzero(box.radius == 0)
    if fixed.size:
        F[:, fixed] = G.T @ lu.solve(np.ascontiguousarray(family.B_eq[:, fixed]))
    F[:, 0] -= F[:, fixed] @ box.mid[fixed - 1] if fixed.size else 0.0
    return F - G.T @ lu.solve(np.ascontiguousarray(G @ F - family.B_eq))
