"""The robust LP of the paper (section 4.2) for jointly linear families over a box, solved fast.

The rule is affine in the original variables, ``y = F x`` with ``x = (1, xi)`` and ``F: (n, k + 1)``. It
maximises the margin ``t`` such that ``G F = B_eq`` (coefficient-wise, so ``G y = g(x)`` for every x) and,
for every inequality row i with weight ``w_i`` (1 in the standard form, ``||H_i||_2`` in the inequality
form), ``min_{xi in box} (B_ineq - H F)_i x >= w_i t``. Over the box ``xi = mu + rho u``, ``u in [-1, 1]^k``::

    min_xi z'x = z'(1, mu) - sum_j rho_j |z_j|           (z = (B_ineq - H F)_i)

The LP has (rows x inputs) absolute values, which made the textbook formulation slow (559 s at 118 buses
with simplex). What this module does instead, each step measured on the paper's cases:

1. **Change of coordinates** to ``u in [-1, 1]^k``; input columns that move no right-hand side (zero-load
   buses) or have zero radius are dropped: their optimal coefficient is the particular solution.
2. **Exact elimination of the equalities**: ``F = F_p + N W`` with ``N`` an orthonormal null-space basis of
   ``G`` (float64 SVD). For DC-OPF ``N`` has ``d = ng - fixed - 1`` columns (18 at 118 buses), so ``W`` has
   ``d (k + 1)`` entries and ``G F = B_eq`` holds to ~1e-13 by construction.
3. **One box-dual per two-sided expression**: rows come in (upper, lower) pairs of the same expression
   (``H_l = -H_i``, opposite input coefficients); such a pair shares its absolute values. Pairs are detected
   generically from the data, not assumed.
4. **Row generation**: only a few expressions bind. The LP is solved on a working set of expressions
   (seeded by the smallest half-ranges and by the worst rows of a least-squares rule), every row is then
   checked in closed form, and violated rows are added until none is. The result is optimal for the full
   LP (the working-set LP is a relaxation whose optimum is feasible for all rows).
5. **Interior point** (Clarabel, or HiGHS IPX without crossover), with a tiny proximal term
   ``(eps / 2) ||W||^2`` under Clarabel: the LP has many optimal ``F``, and without it the interior point
   returns wild rules in directions the working set cannot see, which costs extra rounds.

After solving, the rule is re-projected onto ``G F = B_eq`` with the SVD and the margin is recomputed in
float64 in closed form over all rows: ``t_star`` is that verified value, never the solver's.

Beyond the paper (docs/cost_aware_rule.md): an **unbounded margin** (``C(x)`` with a recession direction that
loosens every row) is detected before solving and capped, and the smallest rule at the cap is returned, so both
solvers report the same; a **cost stage** (``cost=``) keeps ``t >= rho t*`` and minimises the rule's expected
objective over the box (a linear or convex quadratic function of ``W``), with the same row generation; an
**input polytope** (``family.polytope``, :mod:`hardlinear.constraints.polytope`) replaces each row's closed-form worst case by
its LP dual (one multiplier vector per row, :func:`_polytope_working_set_lp`) and the float64 check by a certified
HiGHS bound (:func:`verified_row_margins`).

Measured on this machine (2 shared cores, one thread, Clarabel; benchmarks/bench_decision_rules.py): the
paper cases 14-200 buses in 0.4-4 s each (at most 3 rounds, 40-66 expressions of 42-522 in the LP, < 400 MB
peak), PGLib case300 at uncertainty 0.1 in about 60 s and 0.56 GB; the whole LP without row generation took
18-45 s at 118-200 buses, and the prototype's 300-bus LP 139 s and 2.9 GB.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from hardlinear.constraints.family import InputBox, JointlyLinearFamily
from hardlinear.rules.cost import RuleCost
from hardlinear.rules.sparse_products import sparse_times_dense

log = logging.getLogger(__name__)

# clarabel: interior point with a direct factorisation (fastest to ~300 buses); highs: HiGHS IPX without
# crossover; pdlp: HiGHS's first-order primal-dual LP method, which never factorises (memory ~ the LP's nonzeros)
LP_SOLVERS = ("clarabel", "highs", "pdlp")
# Relative tolerance on a row's margin below the working-set optimum before the row joins the working set.
ROW_TOLERANCE = 1e-7
# Proximal weight on W under Clarabel (see the module docstring); small enough that t* agrees with the
# unregularised full LP to ~1e-9 on the paper cases (tests/test_decision_rules.py checks 14 and 30 buses).
DEFAULT_REGULARIZATION = 1e-7
# The cost stage keeps t >= rho t_kept - COST_FLOOR_RTOL |t_kept| (t_kept: the verified margin-only t*, or the cap).
COST_FLOOR_RTOL = 1e-9


@dataclass
class RuleSolution:
    """A solved decision rule: ``y_orig = F x`` plus what is needed to report and reproduce it."""

    F: np.ndarray  # (n_orig, k + 1) float64
    t_star: float  # verified margin (float64, closed form or certificate)
    row_margins: np.ndarray  # (m_ineq,) verified worst-case margin of every row (slack / weight)
    status: str
    solver: str
    solve_time_s: float
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def binding_row(self) -> int:
        return int(np.argmin(self.row_margins)) if self.row_margins.size else -1


# --- data preparation ---------------------------------------------------------------------------------
def row_weights(H: sp.spmatrix, form: str) -> np.ndarray:
    """Margin weights: 1 per row in the standard form (rows ``-s_i <= 0``), ``||H_i||_2`` in the inequality
    form, so that ``t`` is a distance in comparable units."""
    if form == "standard":
        return np.ones(H.shape[0])
    if form == "inequality":
        norms = np.sqrt(np.asarray(sp.csr_matrix(H).multiply(H).sum(axis=1))).ravel()
        if np.any(norms == 0):
            raise ValueError(f"inequality rows {np.flatnonzero(norms == 0)[:10].tolist()} of H are zero")
        return norms
    raise ValueError(f"form must be 'standard' or 'inequality'; got {form!r}")


def box_transform(box: InputBox) -> np.ndarray:
    """``T: (k + 1, k + 1)`` with ``x = T (1, u)``: ``xi = mid + radius * u``, ``u in [-1, 1]^k``."""
    k = box.k
    T = np.zeros((k + 1, k + 1))
    T[0, 0] = 1.0
    T[1:, 0] = box.mid
    T[1:, 1:] = np.diag(box.radius)
    return T


def find_expression_pairs(H: sp.spmatrix, B_var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group inequality rows into expressions: ``(upper, lower)`` with ``lower = -1`` for a lone row.

    Rows i and l pair when ``H_l = -H_i`` exactly and their input-dependent right-hand sides are opposite
    (``B_var: (m, q)``, the coefficients on the active inputs): then both bound the same affine expression and
    share its absolute values in the robust LP.
    """
    H = sp.csr_matrix(H, copy=True)
    H.sum_duplicates()
    H.sort_indices()
    B_var = np.ascontiguousarray(B_var, dtype=np.float64) + 0.0  # +0.0 maps -0.0 to 0.0 for the keys

    def key(i: int, sign: float) -> bytes:
        s, e = H.indptr[i], H.indptr[i + 1]
        return H.indices[s:e].tobytes() + b"|" + (sign * H.data[s:e] + 0.0).tobytes() + b"|" + (sign * B_var[i] + 0.0).tobytes()

    waiting: dict[bytes, list[int]] = {}
    for i in range(H.shape[0]):
        waiting.setdefault(key(i, 1.0), []).append(i)
    used = np.zeros(H.shape[0], dtype=bool)
    upper, lower = [], []
    for i in range(H.shape[0]):
        if used[i]:
            continue
        used[i] = True
        partner = -1
        for cand in waiting.get(key(i, -1.0), []):
            if not used[cand]:
                partner = cand
                used[cand] = True
                break
        upper.append(i)
        lower.append(partner)
    return np.asarray(upper, dtype=int), np.asarray(lower, dtype=int)


@dataclass
class _Reduced:
    """The robust LP after the change of coordinates, the elimination and the pairing."""

    T: np.ndarray  # (K, K)
    active: np.ndarray  # active input columns (1-based positions in x)
    Fp: np.ndarray  # (n, K) particular solution in u-coordinates, all columns
    N: np.ndarray  # (n, d) orthonormal null-space basis of G
    pinv: tuple[np.ndarray, np.ndarray, np.ndarray]  # (U_r, s_r, Vt_r) of G for re-projection
    upper: np.ndarray  # (E,)
    lower: np.ndarray  # (E,) -1 if lone
    M: np.ndarray  # (E, d) = H_upper N
    C: np.ndarray  # (E, q) constant part of a_ej = M_e W_j + C_ej over active columns
    R_up: np.ndarray  # (E,) constant of the upper row's slack before W_0
    R_lo: np.ndarray  # (E,) same for the lower row (+inf for lone rows)
    w: np.ndarray  # (E,) weights
    # the input polytope in u-coordinates over the active columns, (A_u: (p, q), b_u: (p,)), its rows followed
    # by the box's (|u| <= 1); None for a box (whose worst case is closed form)
    poly: tuple[np.ndarray, np.ndarray] | None = None


def _reduce(family: JointlyLinearFamily, weights: np.ndarray, cost: RuleCost | None = None) -> _Reduced:
    G = family.G
    T = box_transform(family.box)
    Beq = family.B_eq @ T
    Bin = family.B_ineq @ T
    moves = np.any(Beq[:, 1:] != 0, axis=0) | np.any(Bin[:, 1:] != 0, axis=0)
    if cost is not None and cost.C is not None:  # an input the cost depends on may pay to enter the rule
        moves |= np.any(cost.C != 0, axis=0)
    polytope = getattr(family, "polytope", None)
    if polytope is not None:  # inputs are coupled: one that moves no right-hand side can still hedge one that does
        moves[:] = True
    active = 1 + np.flatnonzero(moves & (family.box.radius > 0))
    n = family.n
    if G.shape[0]:
        U, s, Vt = np.linalg.svd(G.toarray(), full_matrices=True)
        rank = int(np.sum(s > s[0] * max(G.shape) * np.finfo(float).eps)) if s.size and s[0] > 0 else 0
        Ur, sr, Vtr = U[:, :rank], s[:rank], Vt[:rank]
        N = Vt[rank:].T
        Fp = Vtr.T @ ((Ur.T @ Beq) / sr[:, None])
        resid = np.abs(G @ Fp - Beq).max() / (1.0 + np.abs(Beq).max())
        if resid > 1e-8:
            raise ProgramInfeasible(f"G F = B_eq has no solution for F (relative residual {resid:.2e})")
    else:
        Ur, sr, Vtr = np.zeros((0, 0)), np.zeros(0), np.zeros((0, n))
        N, Fp = np.eye(n), np.zeros((n, Beq.shape[1]))
    upper, lower = find_expression_pairs(family.H, Bin[:, active])
    Hc = sp.csr_matrix(family.H)
    Hu = Hc[upper]
    M = np.asarray(Hu @ N)
    HFp = np.asarray(Hu @ Fp)
    C = HFp[:, active] - Bin[upper][:, active]
    R_up = Bin[upper, 0] - HFp[:, 0]
    lone = lower < 0
    R_lo = np.where(lone, np.inf, Bin[np.where(lone, 0, lower), 0] + HFp[:, 0])
    poly = None
    if polytope is not None:
        cols = active - 1
        q = len(cols)
        A_u = polytope.A[:, cols] * family.box.radius[cols]
        b_u = polytope.b - polytope.A @ family.box.mid
        poly = (np.vstack([A_u, np.eye(q), -np.eye(q)]), np.concatenate([b_u, np.ones(2 * q)]))
    return _Reduced(T, active, Fp, N, (Ur, sr, Vtr), upper, lower, M, C, R_up, R_lo, weights[upper], poly)


class ProgramInfeasible(Exception):
    """The rule's program has no feasible point (the equalities cannot hold for every input)."""


class ProgramUnbounded(RuntimeError):
    """A solver reported the rule's program unbounded (a margin without a cap, or a cost unbounded below)."""


def _expression_margins(red: _Reduced, W: np.ndarray) -> np.ndarray:
    """Worst-case margin of every expression ``(E,)`` (min of its two rows) for ``W: (d, 1 + q)``: in closed form
    over a box, by the certified LP bound of :func:`hardlinear.constraints.polytope.support` over a polytope."""
    if red.poly is None:
        return _box_expression_margins(red, W)
    from hardlinear.constraints.polytope import support

    A = red.M @ W
    a = A[:, 1:] + red.C  # the upper row's slack is R_up - A_0 - a'u, the lower row's R_lo + A_0 + a'u
    two = red.lower >= 0
    bound = np.ones(a.shape[1])
    up = support(a, *red.poly, bound)[0]
    lo = np.full(len(a), np.inf)
    lo[two] = red.R_lo[two] + A[two, 0] - support(-a[two], *red.poly, bound)[0]
    return np.minimum(red.R_up - A[:, 0] - up, lo) / red.w


def _box_expression_margins(red: _Reduced, W: np.ndarray) -> np.ndarray:
    """The closed form over the box (for a polytope: over its bounding box, a lower bound, used to seed)."""
    A = red.M @ W
    spread = np.abs(A[:, 1:] + red.C).sum(axis=1)
    return np.minimum(red.R_up - A[:, 0] - spread, red.R_lo + A[:, 0] - spread) / red.w


# --- the LP on a working set ----------------------------------------------------------------------------
def _working_set_lp(red: _Reduced, S: np.ndarray, scaling: bool = False, t_fixed: float | None = None) -> dict[str, Any]:
    """``max t`` over ``z = [W (d (q + 1), column-major by input) | V+ | V- (E_S q) | spread (E_S) | t]``.

    Rows: ``M_e W_j - V+_ej + V-_ej = -C_ej`` and ``spread_e = sum_j (V+_ej + V-_ej)`` (equalities);
    ``M_e W_0 + spread_e + w_e t <= R_up_e`` and ``-M_e W_0 + spread_e + w_e t <= R_lo_e`` (inequalities).

    ``scaling=True``: the largest-uncertainty LP of :func:`max_uncertainty_scaling` instead, the same rows with
    ``t``'s coefficients ``R_up_e`` / ``R_lo_e`` and right-hand sides 0 (there ``t = -1/kappa``).

    ``t_fixed``: ``t`` is a constant (the cost stage's floor), moved to the right-hand sides, and the variable
    is dropped (``lp["t"]`` is None). Keeping it as a variable with bounds ``floor <= t <= cap`` left a free
    direction along an unbounded margin that made Clarabel report ``PrimalInfeasible`` for caps of 1e3-1e5.
    """
    if red.poly is not None:
        if scaling:
            raise ValueError("the largest-uncertainty LP is defined for an input box, not a polytope")
        return _polytope_working_set_lp(red, S, t_fixed)
    d, q, E = red.N.shape[1], red.C.shape[1], len(S)
    Ms = sp.csr_matrix(red.M[S])
    nW = d * (q + 1)
    nv = nW + 2 * E * q + E + 1
    IEq = sp.identity(E * q, format="csr")
    abs_rows = sp.hstack(
        [sp.csr_matrix((E * q, d)), sp.kron(sp.identity(q, format="csr"), Ms), -IEq, IEq, sp.csr_matrix((E * q, E + 1))]
    )
    summ = sp.kron(np.ones((1, q)), sp.identity(E, format="csr"))
    spread_rows = sp.hstack([sp.csr_matrix((E, nW)), -summ, -summ, sp.identity(E), sp.csr_matrix((E, 1))])
    Aeq = sp.vstack([abs_rows, spread_rows]).tocsr()
    beq = np.concatenate([-red.C[S].T.reshape(-1), np.zeros(E)])
    gap = sp.csr_matrix((E, nW - d + 2 * E * q))
    two = red.lower[S] >= 0
    col_up, col_lo = (red.R_up[S], red.R_lo[S][two]) if scaling else (red.w[S], red.w[S][two])
    Ain = sp.vstack(
        [
            sp.hstack([Ms, gap, sp.identity(E), sp.csr_matrix(col_up[:, None])]),
            sp.hstack([-Ms[two], gap[two], sp.identity(E, format="csr")[two], sp.csr_matrix(col_lo[:, None])]),
        ]
    ).tocsr()
    bin_ = np.zeros(E + int(two.sum())) if scaling else np.concatenate([red.R_up[S], red.R_lo[S][two]])
    nonneg = np.arange(nW, nW + 2 * E * q)
    if t_fixed is not None:
        bin_ = bin_ - Ain[:, nv - 1].toarray().ravel() * float(t_fixed)
        Ain, Aeq = Ain[:, : nv - 1].tocsr(), Aeq[:, : nv - 1].tocsr()
        return {"Aeq": Aeq, "beq": beq, "Ain": Ain, "bin": bin_, "nonneg": nonneg, "nv": nv - 1, "nW": nW, "t": None}
    return {"Aeq": Aeq, "beq": beq, "Ain": Ain, "bin": bin_, "nonneg": nonneg, "nv": nv, "nW": nW, "t": nv - 1}


def _polytope_working_set_lp(red: _Reduced, S: np.ndarray, t_fixed: float | None = None) -> dict[str, Any]:
    """The working-set LP over the input polytope ``P_u = {u : A_u u <= b_u}`` (LP duality, one multiplier vector
    per row): ``z = [W (d (q + 1), column-major by input) | lam (p E_S, row-major by polytope row) | mu (p E_2) | t]``.

    An upper row's worst slack ``R_up - M_e W_0 - max_{u in P_u} a_e'u`` (``a_e = M_e W_{1:} + C_e``) is at least
    ``R_up - M_e W_0 - b_u'lam_e`` for every ``lam_e >= 0`` with ``A_u'lam_e = a_e``, with equality at the best
    ``lam_e`` (LP duality; ``P_u`` is non-empty and bounded). A lower row has its own ``mu_e`` with
    ``A_u'mu_e = -a_e``: over a box, ``P_u = -P_u`` and one set of absolute values served both rows.
    """
    A_u, b_u = red.poly
    d, q, E, p = red.N.shape[1], red.C.shape[1], len(S), A_u.shape[0]
    two = red.lower[S] >= 0
    E2 = int(two.sum())
    Ms = sp.csr_matrix(red.M[S])
    nW = d * (q + 1)
    nv = nW + p * E + p * E2 + 1
    At = sp.csr_matrix(A_u.T)
    eq_up = sp.hstack([sp.csr_matrix((q * E, d)), sp.kron(sp.identity(q), -Ms), sp.kron(At, sp.identity(E)), sp.csr_matrix((q * E, p * E2 + 1))])
    eq_lo = sp.hstack([sp.csr_matrix((q * E2, d)), sp.kron(sp.identity(q), Ms[two]), sp.csr_matrix((q * E2, p * E)), sp.kron(At, sp.identity(E2)), sp.csr_matrix((q * E2, 1))])
    Aeq = sp.vstack([eq_up, eq_lo]).tocsr()
    beq = np.concatenate([red.C[S].T.reshape(-1), -red.C[S][two].T.reshape(-1)])
    gap = sp.csr_matrix((E, nW - d))
    in_up = sp.hstack([Ms, gap, sp.kron(b_u[None, :], sp.identity(E)), sp.csr_matrix((E, p * E2)), sp.csr_matrix(red.w[S][:, None])])
    in_lo = sp.hstack([-Ms[two], gap[two], sp.csr_matrix((E2, p * E)), sp.kron(b_u[None, :], sp.identity(E2)), sp.csr_matrix(red.w[S][two][:, None])])
    Ain = sp.vstack([in_up, in_lo]).tocsr()
    bin_ = np.concatenate([red.R_up[S], red.R_lo[S][two]])
    nonneg = np.arange(nW, nW + p * (E + E2))
    if t_fixed is not None:
        bin_ = bin_ - Ain[:, nv - 1].toarray().ravel() * float(t_fixed)
        Ain, Aeq = Ain[:, : nv - 1].tocsr(), Aeq[:, : nv - 1].tocsr()
        return {"Aeq": Aeq, "beq": beq, "Ain": Ain, "bin": bin_, "nonneg": nonneg, "nv": nv - 1, "nW": nW, "t": None}
    return {"Aeq": Aeq, "beq": beq, "Ain": Ain, "bin": bin_, "nonneg": nonneg, "nv": nv, "nW": nW, "t": nv - 1}


def _solve_clarabel(lp: dict[str, Any], regularization: float, threads: int) -> tuple[np.ndarray, str]:
    import clarabel

    nv, nonneg = lp["nv"], lp["nonneg"]
    bound = sp.csr_matrix((-np.ones(len(nonneg)), (np.arange(len(nonneg)), nonneg)), shape=(len(nonneg), nv))
    t_rows, t_rhs = _t_bound_rows(lp)
    A = sp.vstack([lp["Aeq"], lp["Ain"], bound, t_rows]).tocsc()
    b = np.concatenate([lp["beq"], lp["bin"], np.zeros(len(nonneg)), t_rhs])
    q = _objective(lp)
    diag = np.zeros(nv)
    diag[: lp["nW"]] = regularization
    P = sp.diags(diag)
    if lp.get("P") is not None:
        P = P + lp["P"]
    P = sp.triu(P, format="csc")
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.max_threads = threads
    n_in = lp["Ain"].shape[0] + len(nonneg) + len(t_rhs)
    cones = [clarabel.ZeroConeT(lp["Aeq"].shape[0]), clarabel.NonnegativeConeT(n_in)]
    solver = clarabel.DefaultSolver(P, q, A, b, cones, settings)
    if hasattr(solver, "set_termination_callback"):  # clarabel >= 0.10: each iteration feeds the heartbeat
        from hardlinear.rules.progress import clarabel_callback

        solver.set_termination_callback(clarabel_callback())
    sol = solver.solve()
    status = str(sol.status)
    if status in ("DualInfeasible", "AlmostDualInfeasible"):
        raise ProgramUnbounded(f"Clarabel returned {status} (unbounded) on the robust LP")
    if status not in ("Solved", "AlmostSolved"):
        raise RuntimeError(f"Clarabel returned {status} on the robust LP")
    return np.asarray(sol.x), status


def _objective(lp: dict[str, Any]) -> np.ndarray:
    """The linear objective (minimised): ``-t`` (the margin LP) unless the cost stage set one."""
    if lp.get("q") is not None:
        return np.asarray(lp["q"], dtype=np.float64)
    q = np.zeros(lp["nv"])
    q[lp["t"]] = -1.0
    return q


def _t_bound_rows(lp: dict[str, Any]) -> tuple[sp.csr_matrix, np.ndarray]:
    """Rows ``t <= t_hi`` and ``-t <= -t_lo`` for the bounds the lp dict sets (the cap, the cost stage's floor)."""
    rows, rhs = [], []
    if lp.get("t_hi") is not None:
        rows.append(1.0)
        rhs.append(float(lp["t_hi"]))
    if lp.get("t_lo") is not None:
        rows.append(-1.0)
        rhs.append(-float(lp["t_lo"]))
    if not rows:
        return sp.csr_matrix((0, lp["nv"])), np.zeros(0)
    A = sp.csr_matrix((rows, (np.arange(len(rows)), np.full(len(rows), lp["t"]))), shape=(len(rows), lp["nv"]))
    return A, np.asarray(rhs, dtype=np.float64)


def _solve_highs(lp: dict[str, Any], threads: int, method: str = "ipx") -> tuple[np.ndarray, str]:
    """HiGHS on the working-set LP: ``method`` "ipx" (interior point, no crossover) or "pdlp" (first order)."""
    import highspy

    if lp.get("P") is not None:
        raise ValueError("HiGHS is not used for the quadratic cost stage; the caller solves it with Clarabel")
    nv = lp["nv"]
    A = sp.vstack([lp["Aeq"], lp["Ain"]]).tocsc()
    inf = highspy.kHighsInf
    model = highspy.HighsLp()
    model.num_col_, model.num_row_ = nv, A.shape[0]
    cost = _objective(lp)
    lower = np.full(nv, -inf)
    lower[lp["nonneg"]] = 0.0
    upper = np.full(nv, inf)
    if lp.get("t_lo") is not None:  # (the t bounds are only set where t is a variable)
        lower[lp["t"]] = float(lp["t_lo"])
    if lp.get("t_hi") is not None:
        upper[lp["t"]] = float(lp["t_hi"])
    model.col_cost_, model.col_lower_, model.col_upper_ = cost, lower, upper
    model.row_lower_ = np.concatenate([lp["beq"], np.full(len(lp["bin"]), -inf)])
    model.row_upper_ = np.concatenate([lp["beq"], lp["bin"]])
    model.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    model.a_matrix_.start_, model.a_matrix_.index_, model.a_matrix_.value_ = A.indptr, A.indices, A.data
    from hardlinear.solvers.highs import quiet_highs

    h = quiet_highs()
    h.setOptionValue("solver", method)
    if method == "ipx":
        h.setOptionValue("run_crossover", "off")
    h.setOptionValue("threads", threads)
    h.passModel(model)
    h.run()
    status = h.modelStatusToString(h.getModelStatus())
    if status in ("Unbounded", "Primal infeasible or unbounded"):
        raise ProgramUnbounded(f"HiGHS returned {status!r} on the robust LP")
    if status not in ("Optimal", "Unknown"):
        raise RuntimeError(f"HiGHS returned {status!r} on the robust LP")
    return np.asarray(h.getSolution().col_value), status


def _solve_lp(lp: dict[str, Any], solver: str, regularization: float, threads: int) -> tuple[np.ndarray, str]:
    if solver == "clarabel":
        return _solve_clarabel(lp, regularization, threads)
    return _solve_highs(lp, threads, method="pdlp" if solver == "pdlp" else "ipx")


# --- public entry point ---------------------------------------------------------------------------------
def solve_robust_lp(
    family: JointlyLinearFamily,
    weights: np.ndarray,
    solver: str = "clarabel",
    row_generation: bool = True,
    regularization: float = DEFAULT_REGULARIZATION,
    threads: int = 1,
    max_rounds: int = 30,
    margin_gap: float = 0.0,
    *,
    cost: RuleCost | None = None,
    margin_fraction: float = 0.5,
    max_margin: float | str | None = "auto",
    progress: bool = True,
) -> RuleSolution:
    """The paper's robust LP on a box: ``F: (n, k + 1)`` maximising the weighted margin ``t``.

    ``weights: (m_ineq,)`` from :func:`row_weights`. ``row_generation=False`` solves the whole LP at once
    (slower; kept to check the row generation). ``margin_gap``: stop the row generation once the current
    rule's margin over *all* rows is within this relative gap of the working-set optimum (an upper bound on
    the full LP's), instead of adding the rows below it and solving again; 0 (default) runs the rounds until
    no row is below. It saves a whole solve only where a round's rule is already nearly feasible on the rows
    outside its working set. At 1354 and 2000 buses the later rounds (15-45 minutes each) left the working-set
    optimum unchanged (t = 0.03415, 0.00391) but the first round's rule was far from feasible outside it
    (margin -6.7 at 2000 buses), so there the gap did not help. ``info["t_working_set"]`` holds the bound.

    ``max_margin``: an unbounded margin (C(x) has a recession direction ``d`` with ``G d = 0`` and
    ``H d < 0`` on every row, e.g. DC3's QPs, which bound no variable) is detected before solving by a small
    LP (:func:`margin_recession_direction`) and capped at ``t <= max_margin``, with a warning; ``"auto"``
    caps it at :func:`default_margin_cap` (the size of the right-hand sides), a float at that value (also
    when the margin is bounded), ``None`` refuses an unbounded margin (``ProgramUnbounded``). Both solvers
    then report status ``"capped"`` and the same ``t``.

    ``cost``: the cost-aware rule (beyond the paper). After ``t*`` is known, a second stage keeps
    ``t >= margin_fraction * t*`` and minimises the rule's expected objective over the box
    (:mod:`hardlinear.rules.cost`), with its own row generation; ``t_star`` is then the verified margin
    of that rule and ``info`` holds ``t_margin_only`` and both expected costs. A quadratic cost is solved by
    Clarabel whatever ``solver`` is.

    Raises ``RuntimeError`` when the solver fails and :class:`ProgramInfeasible` when ``G F = B_eq`` has no
    solution.
    """
    if not 0.0 <= margin_gap < 1.0:
        raise ValueError(f"margin_gap must be in [0, 1); got {margin_gap!r}")
    if solver not in LP_SOLVERS:
        raise ValueError(f"solver must be one of {LP_SOLVERS} for the robust LP; got {solver!r}")
    if not 0.0 <= margin_fraction <= 1.0:
        raise ValueError(f"margin_fraction must be in [0, 1] (the cost-aware rule keeps t >= fraction * t*); got {margin_fraction!r}")
    if not (max_margin is None or max_margin == "auto" or (isinstance(max_margin, (int, float)) and max_margin > 0)):
        raise ValueError(f"max_margin must be 'auto', None or a positive number; got {max_margin!r}")
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (family.m_ineq,) or np.any(weights <= 0):
        raise ValueError(f"weights must be ({family.m_ineq},) and positive")
    t0 = time.perf_counter()
    red = _reduce(family, weights, cost)
    d, q, E = red.N.shape[1], red.C.shape[1], len(red.upper)
    info: dict[str, Any] = {"null_dim": d, "active_inputs": q, "expressions": E, "rounds": 0, "rows_in_lp": 0}
    cap = _margin_cap(red, family, weights, max_margin, info)
    W = np.zeros((d, q + 1))
    status = "determined"
    S = np.zeros(0, dtype=int)
    clock = _Progress(progress, t0)
    if E and d:
        W, status, S = _row_generation(
            red, solver, row_generation, regularization, threads, max_rounds, info, margin_gap, cap, clock
        )
        if cap is not None and info.get("margin_unbounded"):
            status = "capped"
    F = _finish(red, W, family)
    margins = family_row_margins(F, family, weights)
    t_star = float(margins.min()) if margins.size else float("inf")
    if cost is not None or status == "capped":
        # a capped margin leaves a whole unbounded face of rules with t = cap: without a cost, take its smallest
        # rule (min ||W||^2 at t >= cap, Clarabel), so that every solver returns the same, reasonable one
        F, margins, t_star, status = _cost_stage(
            red, family, weights, cost, margin_fraction if cost is not None else 1.0, F, t_star, S, solver,
            regularization, threads, max_rounds, cap, info, status, clock,
        )
    info["eq_residual"] = float(np.abs(family.G @ F - family.B_eq).max() / (1.0 + np.abs(family.B_eq).max())) if family.m_eq else 0.0
    info["max_abs_coefficient"] = float(np.abs(F).max()) if F.size else 0.0
    return RuleSolution(F, t_star, margins, status, solver, time.perf_counter() - t0, info)


def _finish(red: _Reduced, W: np.ndarray, family: JointlyLinearFamily) -> np.ndarray:
    F = _assemble(red, W, family.B_eq)
    return _reproject(F, family.G, family.B_eq, red.pinv)


class _Progress:
    """Round-by-round progress of a long rule solve: INFO once the solve has run ``after_s`` seconds (so that a
    0.5 s solve stays quiet), DEBUG before that or with ``enabled=False``."""

    def __init__(self, enabled: bool, start: float, after_s: float = 2.0) -> None:
        self.enabled, self.start, self.after_s = enabled, start, after_s

    def __call__(self, message: str, *args: Any) -> None:
        elapsed = time.perf_counter() - self.start
        level = logging.INFO if self.enabled and elapsed >= self.after_s else logging.DEBUG
        log.log(level, "decision rule [%.1f s] " + message, elapsed, *args)
        from hardlinear.rules.progress import report

        report(message % args if args else message)  # the heartbeat's status: the row generation's last round


# --- an unbounded margin ---------------------------------------------------------------------------------
def margin_recession_direction(red: _Reduced) -> np.ndarray | None:
    """A direction ``v`` of the rule's constant column along which every row's slack grows (``M v <= -w``
    on upper rows, ``M v >= w`` on lower ones), or None when there is none, i.e. when ``t*`` is bounded.

    The margin LP is unbounded exactly when such a ``v`` exists (its recession cone: the spreads cannot fall,
    so only the constant column can carry ``t`` to infinity), i.e. when ``C(x)`` has a recession direction
    ``d = N v`` with ``G d = 0`` and ``H d < 0`` on every row. A two-sided expression rules it out at once.
    """
    E, d = red.M.shape
    if E == 0 or d == 0 or np.any(red.lower >= 0):
        return None
    from scipy.optimize import linprog

    # max s  s.t.  M v + w s <= 0,  s <= 1, v free (the cone scaled so that s = 1 when it is non-trivial)
    A_ub = np.hstack([red.M, red.w[:, None]])
    res = linprog(np.r_[np.zeros(d), -1.0], A_ub=A_ub, b_ub=np.zeros(E), bounds=[(None, None)] * d + [(None, 1.0)], method="highs")
    if res.status != 0 or -res.fun < 0.5:
        return None
    return np.asarray(res.x[:d])


def default_margin_cap(family: JointlyLinearFamily, weights: np.ndarray) -> float:
    """The margin cap of ``max_margin="auto"``: the largest ``|h_i(x)| / w_i`` over rows and the box (at least
    1), so that a capped rule keeps slacks of the size of the constraints' own right-hand sides."""
    B = np.asarray(family.B_ineq)
    if B.size == 0:
        return 1.0
    largest = np.abs(B[:, 0] + B[:, 1:] @ family.box.mid) + np.abs(B[:, 1:]) @ family.box.radius
    return float(max(1.0, np.max(largest / weights)))


def _margin_cap(red: _Reduced, family: JointlyLinearFamily, weights: np.ndarray, max_margin, info: dict[str, Any]) -> float | None:
    import warnings

    direction = margin_recession_direction(red)
    info["margin_unbounded"] = direction is not None
    if direction is None:
        return None if max_margin in (None, "auto") else float(max_margin)
    if max_margin is None:
        raise ProgramUnbounded(
            "the decision rule's margin is unbounded: C(x) is unbounded (a direction d with G d = 0 and H d < 0 on "
            "every row), so every slack can grow without limit; pass max_margin='auto' or a number to cap it"
        )
    cap = default_margin_cap(family, weights) if max_margin == "auto" else float(max_margin)
    info["margin_cap"] = cap
    warnings.warn(
        f"the decision rule's margin is unbounded: C(x) has a recession direction (G d = 0, H d < 0 on every "
        f"row; no variable bounds), so maximising t alone gives rules with ever larger coefficients. t is capped "
        f"at {cap:.4g} (max_margin={max_margin!r}); a cost-aware rule (rule_objective='cost') also picks the "
        "rule by its expected objective",
        stacklevel=4,
    )
    return cap


def _row_generation(red, solver, row_generation, regularization, threads, max_rounds, info, margin_gap=0.0, cap=None, clock=None):
    d, q, E = red.N.shape[1], red.C.shape[1], len(red.upper)
    clock = clock or _Progress(False, time.perf_counter())
    S = _seed(red) if row_generation else np.arange(E)
    for rounds in range(1, max_rounds + 1):
        lp = _working_set_lp(red, S)
        lp["t_hi"] = cap
        clock("margin round %d: solving %d of %d expressions (%d variables, %d nonzeros)", rounds, len(S), E, lp["nv"], lp["Aeq"].nnz + lp["Ain"].nnz)
        try:
            z, status = _solve_lp(lp, solver, regularization, threads)
        except ProgramUnbounded as err:
            raise ProgramUnbounded(f"{err}; the margin is unbounded on the working set (report a bug: the recession check missed it)") from err
        W = z[: lp["nW"]].reshape(q + 1, d).T
        t_ws = float(z[lp["t"]])
        margins = _expression_margins(red, W)
        below = np.flatnonzero(margins < t_ws - ROW_TOLERANCE * max(1.0, abs(t_ws)))
        fresh = below[~np.isin(below, S)]
        info.update(
            rounds=rounds,
            rows_in_lp=int(len(S)),
            n_variables=int(lp["nv"]),
            n_constraints=int(lp["Aeq"].shape[0] + lp["Ain"].shape[0]),
            nnz=int(lp["Aeq"].nnz + lp["Ain"].nnz),
            t_working_set=t_ws,  # the working-set LP is a relaxation: its optimum bounds the full LP's from above
        )
        t_rule = float(margins.min())  # this rule's margin over all rows: a lower bound
        clock("margin round %d: t=%.6g, rule's margin over all rows %.6g, %d rows below", rounds, t_ws, t_rule, len(fresh))
        if fresh.size == 0:
            return W, status, S
        if margin_gap > 0 and t_ws - t_rule <= margin_gap * abs(t_ws):
            info["stopped_at_gap"] = (t_ws - t_rule) / abs(t_ws)
            return W, status, S
        add = fresh[np.argsort(margins[fresh])][: max(50, d)]
        S = np.concatenate([S, add])
        if len(S) > 0.6 * E:  # most rows matter: the whole LP is cheaper than more rounds
            S = np.arange(E)
    raise RuntimeError(f"row generation did not converge in {max_rounds} rounds; use row_generation=False")


# --- the cost-aware rule ----------------------------------------------------------------------------------
def _cost_terms(red: _Reduced, cost: RuleCost | None, nv: int, box: InputBox | None = None) -> tuple[np.ndarray, sp.csr_matrix | None]:
    """``(q, P)`` over the working-set LP's variables with ``1/2 z'Pz + q'z = E[f(y)] + const``.

    In u-coordinates ``y = Fu (1, u)`` with ``(1, u) = L x`` on the constant and active columns (the others of
    ``Fu`` are fixed at zero) and ``S_u = L E[x x'] L'``: ``E[c(x)' y] = <Fu, [c0 | C] E[x x'] L'>`` and
    ``E[1/2 y'Qy] = 1/2 tr(Fu' Q Fu S_u)``, with ``Fu = Fp + N W``. Over a box (uniform) ``S_u = diag(1, 1/3, ...)``
    exactly (``L E[x] = e_0``), so ``P`` is block diagonal; over a polytope it couples the inputs.
    """
    from hardlinear.rules.cost import cost_matrix, cost_moments

    d, q = red.N.shape[1], red.C.shape[1]
    nW = d * (q + 1)
    qvec = np.zeros(nv)
    if cost is None:  # the smallest rule: min 1/2 ||W||^2
        return qvec, sp.diags(np.r_[np.ones(nW), np.zeros(nv - nW)], format="csr")
    K = red.T.shape[0]
    mid, rad = red.T[1:, 0], np.diag(red.T)[1:]
    L = np.zeros((q + 1, K))
    L[0, 0] = 1.0
    cols = red.active
    L[np.arange(1, q + 1), cols] = 1.0 / rad[cols - 1]
    L[np.arange(1, q + 1), 0] = -mid[cols - 1] / rad[cols - 1]
    _, second = cost_moments(cost, box if box is not None else InputBox(mid - rad, mid + rad))
    S_u = L @ second @ L.T
    S_u = 0.5 * (S_u + S_u.T)
    lin = red.N.T @ (cost_matrix(cost, K - 1) @ second @ L.T)  # (d, q + 1)
    if cost.Q is None:
        qvec[:nW] = lin.T.reshape(-1)
        return qvec, None
    QN = np.asarray(cost.Q @ red.N)
    NQN = red.N.T @ QN
    NQN = 0.5 * (NQN + NQN.T)
    lin = lin + QN.T @ (red.Fp[:, np.concatenate([[0], cols])] @ S_u)
    qvec[:nW] = lin.T.reshape(-1)
    S_u[np.abs(S_u) <= 1e-15 * np.abs(S_u).max()] = 0.0  # exact zeros over a box: keep P block diagonal
    P = sp.kron(sp.csr_matrix(S_u), sp.csr_matrix(NQN), format="csr")
    P = sp.bmat([[P, None], [None, sp.csr_matrix((nv - P.shape[0], nv - P.shape[0]))]], format="csr")
    return qvec, P


def _cost_stage(red, family, weights, cost, fraction, F1, t1, S, solver, regularization, threads, max_rounds, cap, info, status, clock):
    """Minimise the expected cost subject to ``t >= fraction * t1`` (row generation from the margin stage's
    working set); returns ``(F, verified row margins, verified t, status)``."""
    from hardlinear.rules.cost import expected_cost

    if cost is not None and cost.c.shape != (family.n,):
        raise ValueError(f"the rule cost has {cost.c.size} entries; the rule has {family.n} variables")
    if cap is not None and info.get("margin_unbounded"):
        # t* = cap exactly (a recession direction carries any rule's margin to it); the margin stage's own rule
        # can fall short of a large cap (its proximal term pulls t down: 2.7e3 at a cap of 1e5), so keep the cap
        t_kept = cap
    else:
        t_kept = t1 if cap is None else min(t1, cap)  # t1: verified; a capped rule may exceed the cap by luck
    info.update(t_margin_only=t_kept, margin_fraction=fraction)
    if cost is not None:
        info["expected_cost_margin_only"] = expected_cost(F1, cost, family.box)
    d, q, E = red.N.shape[1], red.C.shape[1], len(red.upper)
    if not (t1 > 0) or not (E and d):
        reason = "no positive margin to keep" if not t1 > 0 else "the rule is determined by the equalities"
        info["cost_stage"] = f"skipped: {reason}"
        margins = family_row_margins(F1, family, weights)
        if cost is not None:
            info["expected_cost"] = info["expected_cost_margin_only"]
        return F1, margins, t1, status
    if cost is not None:
        _check_cost_bounded(red, cost, family.box)
    # the floor sits COST_FLOOR_RTOL below fraction * t_kept, so that fraction = 1 (the smallest rule at the cap,
    # or a user's rho = 1) leaves the interior point a strictly feasible program
    floor = fraction * t_kept - COST_FLOOR_RTOL * abs(t_kept)
    stage_solver = "clarabel" if cost is None or cost.is_quadratic else solver
    S = np.unique(S) if len(S) else _seed(red)
    for rounds in range(1, max_rounds + 1):
        lp = _working_set_lp(red, S, t_fixed=floor)
        qvec, lp["P"] = _cost_terms(red, cost, lp["nv"], family.box)
        # z = scale z~: the same program in units of the floor (1/2 z'Pz + q'z = scale^2 (1/2 z~'Pz~ + (q/scale)'z~)),
        # so that a margin of 1e5 and rule coefficients of 1e7 reach Clarabel as numbers of order one
        scale = max(1.0, abs(floor))
        lp["q"], lp["beq"], lp["bin"] = qvec / scale, lp["beq"] / scale, lp["bin"] / scale
        clock("cost round %d: %d of %d expressions, t >= %.6g", rounds, len(S), E, floor)
        try:
            z, stage_status = _solve_lp(lp, stage_solver, regularization, threads)
            z = z * scale
        except ProgramUnbounded as err:
            raise ProgramUnbounded(
                f"{err}: the expected objective is unbounded below over rules with margin >= {floor:.4g}; "
                "use rule_objective='margin' (or bound the variables)"
            ) from err
        W = z[: lp["nW"]].reshape(q + 1, d).T
        margins = _expression_margins(red, W)
        fresh = np.flatnonzero(margins < floor - ROW_TOLERANCE * max(1.0, abs(floor)))
        fresh = fresh[~np.isin(fresh, S)]
        info.update(cost_rounds=rounds, cost_rows_in_lp=int(len(S)), cost_solver=stage_solver)
        if fresh.size == 0:
            break
        S = np.concatenate([S, fresh[np.argsort(margins[fresh])][: max(50, d)]])
        if len(S) > 0.6 * E:
            S = np.arange(E)
    else:
        raise RuntimeError(f"the cost stage's row generation did not converge in {max_rounds} rounds")
    F = _finish(red, W, family)
    margins = family_row_margins(F, family, weights)
    t = float(margins.min())
    if cost is None:
        info["cost_stage"] = "smallest rule at the capped margin"
        clock("capped margin: smallest rule has verified margin %.6g", t)
        return F, margins, t, status
    info.update(cost_stage="solved", expected_cost=expected_cost(F, cost, family.box))
    clock("cost stage: verified margin %.6g (margin-only %.6g), expected cost %.6g (margin-only %.6g)", t, t_kept, info["expected_cost"], info["expected_cost_margin_only"])
    return F, margins, t, status if status == "capped" else stage_status


def _check_cost_bounded(red: _Reduced, cost: RuleCost, box: InputBox) -> None:
    """Raise :class:`ProgramUnbounded` when the expected cost falls without limit over the cost stage's rules: a
    direction ``v`` of the constant column that no row's slack loses on (``M v <= 0``, ``M v >= 0`` on lower
    rows), that the quadratic part does not see (``Q N v = 0``) and along which ``c' N v < 0``. (The solver,
    with its tiny proximal term, would otherwise return a huge finite rule.)"""
    from scipy.optimize import linprog

    from hardlinear.rules.cost import cost_matrix, cost_moments

    E, d = red.M.shape
    two = red.lower >= 0
    A_ub = np.vstack([red.M, -red.M[two]])
    A_eq = np.asarray(cost.Q @ red.N) if cost.Q is not None else None
    c_mean = cost_matrix(cost, box.k) @ cost_moments(cost, box)[0]  # E[c(x)]: what the constant column pays
    res = linprog(
        red.N.T @ c_mean, A_ub=A_ub, b_ub=np.zeros(A_ub.shape[0]), A_eq=A_eq,
        b_eq=None if A_eq is None else np.zeros(A_eq.shape[0]), bounds=[(-1.0, 1.0)] * d, method="highs",
    )
    scale = 1.0 + np.abs(red.N.T @ c_mean).sum()
    if res.status == 0 and res.fun < -1e-9 * scale:
        raise ProgramUnbounded(
            "the rule's expected objective is unbounded below: C(x) has a recession direction along which the "
            f"objective falls (c' d = {res.fun:.3g} < 0 for a unit direction d with G d = 0, H d <= 0). Use "
            "rule_objective='margin', or bound the variables"
        )


def max_uncertainty_scaling(
    family: JointlyLinearFamily,
    solver: str = "clarabel",
    threads: int = 1,
    max_rounds: int = 30,
    regularization: float = DEFAULT_REGULARIZATION,
    margin_gap: float = 0.0,
) -> tuple[float, dict[str, Any]]:
    """The largest factor ``kappa`` by which the inputs' effect on the right-hand sides (the input columns of
    ``B_eq`` and ``B_ineq``, i.e. the box's radius) can be scaled with a rule of margin ``t >= 0`` still
    existing, by one LP instead of a bisection over margin LPs; returns ``(kappa, info)``.

    Why it is one LP: in u-coordinates a rule at scale ``kappa`` has input columns ``kappa W~`` and constant
    column ``W_0``, and an expression's worst case is ``R - M_e W_0 - kappa spread_e(W~)`` (the constant parts
    ``R`` do not scale). With ``sigma = 1/kappa`` and ``W^_0 = sigma W_0`` the condition ``>= 0`` becomes
    ``M_e W^_0 + spread_e(W~) - sigma R <= 0``, linear in ``(W^_0, W~, sigma)``: minimise ``sigma``. The
    margin ``t*(kappa)`` of the ordinary LP is convex and non-increasing in ``kappa`` (a maximum of affine
    non-increasing functions), so it is strictly positive for every ``kappa`` below the returned value and
    not above it. ``inf`` when no expression needs to shrink (no finite limit). Row generation as in
    :func:`solve_robust_lp`; with ``margin_gap > 0`` it stops once the working set's ``kappa`` (an upper
    bound) is within that relative gap of the ``kappa`` the current rule certifies over all rows (its own
    largest feasible scale, a lower bound), and returns the lower bound (``info["kappa_upper"]``: the other).
    """
    if not 0.0 <= margin_gap < 1.0:
        raise ValueError(f"margin_gap must be in [0, 1); got {margin_gap!r}")
    if solver not in LP_SOLVERS:
        raise ValueError(f"solver must be one of {LP_SOLVERS}; got {solver!r}")
    if getattr(family, "polytope", None) is not None:
        raise ValueError("max_uncertainty_scaling scales a box about its centre; the family's input set is a polytope")
    t0 = time.perf_counter()
    red = _reduce(family, np.ones(family.m_ineq))
    d, q, E = red.N.shape[1], red.C.shape[1], len(red.upper)
    info: dict[str, Any] = {"null_dim": d, "active_inputs": q, "expressions": E, "rounds": 0}
    if q == 0 or E == 0:
        return float("inf"), {**info, "solve_time_s": time.perf_counter() - t0}
    S = _seed(red)
    for rounds in range(1, max_rounds + 1):
        lp = _working_set_lp(red, S, scaling=True)
        log.debug("max-level LP round %d: solving %d of %d expressions (%d variables, %d nonzeros)", rounds, len(S), E, lp["nv"], lp["Aeq"].nnz + lp["Ain"].nnz)
        z, status = _solve_lp(lp, solver, regularization, threads)
        W = z[: lp["nW"]].reshape(q + 1, d).T
        tau = float(z[lp["t"]])  # = -sigma = -1 / kappa
        A = red.M @ W
        spread = np.abs(A[:, 1:] + red.C).sum(axis=1)
        excess = np.maximum(A[:, 0] + spread + red.R_up * tau, np.where(red.lower >= 0, -A[:, 0] + spread + red.R_lo * tau, -np.inf))
        scale = np.maximum(1.0, np.abs(red.R_up) * abs(tau))
        fresh = np.flatnonzero(excess > ROW_TOLERANCE * scale)
        fresh = fresh[~np.isin(fresh, S)]
        info.update(rounds=rounds, rows_in_lp=int(len(S)), status=status, nnz=int(lp["Aeq"].nnz + lp["Ain"].nnz))
        kappa_rule = _certified_kappa(red, A, spread, tau) if tau < 0 else 0.0
        log.debug(
            "max-level LP round %d: %d expressions, kappa=%.6g, rule's kappa %.6g, %d rows over",
            rounds, len(S), -1.0 / tau if tau < 0 else float("inf"), kappa_rule, len(fresh),
        )
        if fresh.size == 0:
            info["solve_time_s"] = time.perf_counter() - t0
            return (float("inf") if tau >= 0 else -1.0 / tau), info
        if margin_gap > 0 and tau < 0 and kappa_rule > 0 and -1.0 / tau - kappa_rule <= margin_gap * (-1.0 / tau):
            info.update(solve_time_s=time.perf_counter() - t0, kappa_upper=-1.0 / tau, stopped_at_gap=1.0 + tau * kappa_rule)
            return kappa_rule, info
        S = np.concatenate([S, fresh[np.argsort(-excess[fresh])][: max(50, d)]])
        if len(S) > 0.6 * E:
            S = np.arange(E)
    raise RuntimeError(f"row generation did not converge in {max_rounds} rounds")


def _certified_kappa(red: _Reduced, A: np.ndarray, spread: np.ndarray, tau: float) -> float:
    """The largest scale at which the current level round's rule is feasible over *all* rows (a lower bound
    on the supremum; 0 where it is infeasible at every scale). Unscaled, the rule's constant column is
    ``W_0 = W^_0 / sigma`` and a row needs ``R - M_e W_0 - kappa spread_e >= 0``: ``kappa <= (R - M_e W_0) /
    spread_e``. Varying ``sigma`` with ``W^_0`` fixed would not do: rows with ``R < 0`` pin it."""
    m0 = A[:, 0] / -tau
    room = np.minimum(red.R_up - m0, np.where(red.lower >= 0, red.R_lo + m0, np.inf))
    if np.any(room < 0):
        return 0.0
    moving = spread > 0
    return float(np.min(room[moving] / spread[moving])) if moving.any() else float("inf")


def _seed(red: _Reduced, n_range: int = 20, n_ls: int = 40) -> np.ndarray:
    """Expressions to start with: the smallest half-ranges (they cap t) and the worst rows of the rule that
    minimises the spreads in least squares (they are the likely binding ones)."""
    from scipy.optimize import linprog

    E, d = red.M.shape
    halfrange = np.where(red.lower >= 0, (red.R_up + red.R_lo) / 2, red.R_up) / red.w
    W = np.zeros((d, red.C.shape[1] + 1))
    if red.C.shape[1]:
        W[:, 1:] = -np.linalg.lstsq(red.M / red.w[:, None], red.C / red.w[:, None], rcond=None)[0]
    spread = np.abs(red.M @ W[:, 1:] + red.C).sum(axis=1)
    two = red.lower >= 0
    A_ub = np.vstack([np.hstack([red.M, red.w[:, None]]), np.hstack([-red.M[two], red.w[two, None]])])
    b_ub = np.concatenate([red.R_up - spread, red.R_lo[two] - spread[two]])
    res = linprog(np.r_[np.zeros(d), -1.0], A_ub=A_ub, b_ub=b_ub, bounds=[(None, None)] * (d + 1), method="highs")
    if res.status == 0:
        W[:, 0] = res.x[:d]
    margins = _box_expression_margins(red, W)
    seed = np.concatenate([np.argsort(halfrange)[:n_range], np.argsort(margins)[: max(n_ls, d)]])
    return np.unique(seed)


def _assemble(red: _Reduced, W: np.ndarray, B_eq: np.ndarray) -> np.ndarray:
    """``F: (n, k + 1)`` in x-coordinates from the u-coordinate rule ``Fp + N W`` on the active columns.

    ``y = Fu (1, u)`` with ``u_j = (xi_j - mid_j) / radius_j``; an input of zero radius has no u-column, and
    its coefficient is the min-norm solution of ``G F_j = B_eq_j`` so that the equalities hold coefficient-wise.
    """
    Fu = red.Fp.copy()  # inactive columns keep the particular solution (zero when their B column is zero)
    Fu[:, np.concatenate([[0], red.active])] += red.N @ W
    mid, rad = red.T[1:, 0], np.diag(red.T)[1:]
    F = np.zeros_like(Fu)
    moving = rad > 0
    F[:, 1:][:, moving] = Fu[:, 1:][:, moving] / rad[moving]
    if not np.all(moving):
        Ur, sr, Vtr = red.pinv
        fixed = 1 + np.flatnonzero(~moving)
        F[:, fixed] = Vtr.T @ ((Ur.T @ B_eq[:, fixed]) / sr[:, None]) if sr.size else 0.0
    F[:, 0] = Fu[:, 0] - F[:, 1:] @ mid
    return F


def _reproject(F: np.ndarray, G: sp.spmatrix, B_eq: np.ndarray, pinv) -> np.ndarray:
    """One least-squares correction ``F -= G^+ (G F - B_eq)``: removes the solver's and the change of
    coordinates' rounding so that ``G F = B_eq`` holds to float64 accuracy."""
    Ur, sr, Vtr = pinv
    if not sr.size:
        return F
    R = G @ F - B_eq
    return F - Vtr.T @ ((Ur.T @ R) / sr[:, None])


MARGIN_CHUNK_ROWS = 4096
"""Rows of ``B_ineq - H F`` formed at a time by :func:`verified_row_margins` (``O(chunk k)`` memory)."""


def verified_row_margins(
    F: np.ndarray, H: sp.spmatrix, B_ineq: np.ndarray, box: InputBox, weights: np.ndarray, polytope: Any = None,
    chunk: int | None = None,
) -> np.ndarray:
    """``(m_ineq,)``: ``min_{xi in X} (B_ineq - H F)_i x / w_i`` in float64: in closed form over the box ``X``, or,
    given an input ``polytope`` (whose bounding box is ``box``), the certified LP bound of
    :func:`hardlinear.constraints.polytope.support` (a lower bound on the worst slack whatever HiGHS's tolerances; within
    ``~1e-9`` relative of the exact value in the tests), or for a slab its exact closed form
    (:func:`hardlinear.constraints.polytope.slab_support`). Over the box or a slab, ``chunk`` rows at a time
    (``MARGIN_CHUNK_ROWS`` by default)."""
    from hardlinear.constraints.polytope import as_slab, slab_support, support

    k = box.k  # u-coordinates of the bounding box, where |u| <= 1 on the set
    slab = None if polytope is None else as_slab(polytope)
    if polytope is not None and slab is None:  # one block-diagonal LP over every row: small families only
        Z = np.asarray(B_ineq - H @ F)
        A_u = np.vstack([polytope.A * box.radius, np.eye(k), -np.eye(k)])  # the bounding box's rows are the set's
        b_u = np.concatenate([polytope.b - polytope.A @ box.mid, np.ones(2 * k)])
        worst = Z[:, 0] + Z[:, 1:] @ box.mid - support(-Z[:, 1:] * box.radius, A_u, b_u, np.ones(k))[0]
        return worst / weights
    if slab is not None:  # the slab in u: a' xi = a' mid + (a radius)' u
        a, low, high = slab
        a_u, shift = a * box.radius, float(a @ box.mid)
    H = sp.csr_matrix(H) if sp.issparse(H) else np.asarray(H)
    out, chunk = np.empty(H.shape[0]), chunk or MARGIN_CHUNK_ROWS
    for s in range(0, H.shape[0], chunk):
        e = min(s + chunk, H.shape[0])
        Z = np.asarray(B_ineq[s:e] - (sparse_times_dense(H[s:e], F) if sp.issparse(H) else H[s:e] @ F))
        if slab is None:
            worst = Z[:, 0] + Z[:, 1:] @ box.mid - np.abs(Z[:, 1:]) @ box.radius
        else:
            worst = Z[:, 0] + Z[:, 1:] @ box.mid - slab_support(-Z[:, 1:] * box.radius, a_u, low - shift, high - shift)
        out[s:e] = worst / weights[s:e]
    return out


def family_row_margins(F: np.ndarray, family: JointlyLinearFamily, weights: np.ndarray) -> np.ndarray:
    """:func:`verified_row_margins` over the family's input set (its polytope when it has one, else its box)."""
    return verified_row_margins(F, family.H, family.B_ineq, family.box, weights, getattr(family, "polytope", None))
