"""The robust LP whose inputs all enter through one linear functional, solved as a robust LP with that one input.

When every row's input coefficients are multiples of one vector ``a`` (``B[:, 1:] = b a'`` over the equalities
and the inequalities together), every row reads the inputs through ``s = a' xi`` alone, and the LP over ``k`` inputs
has the optimum of the LP over the one input ``s`` in ``[s_lo, s_hi]``, its range over the input set:

- a rule of ``s`` is a rule of ``xi`` (``y = f_0 + f_1 a' xi``) with the same rows, hence the same margin;
- conversely, take any rule ``F`` with margin ``t`` over the set, and inputs ``x_lo``, ``x_hi`` of the set where
  ``s`` is smallest and largest. The rule of ``s`` that interpolates ``F``'s outputs there,
  ``y(s) = F x_lo + (s - s_lo) / (s_hi - s_lo) (F x_hi - F x_lo)``, gives at each ``s`` a convex combination of the
  two outputs; a row's residual is affine in ``(y, s)``, so it is the same combination of the two residuals, each
  with margin ``t``. The equalities hold the same way.

So ``t*`` is the one-input LP's, and the lifted rule ``F = (f_0, f_1 a')`` is an optimal rule of the whole LP, over
a box or any bounded input set (an input polytope: ``s``'s range is two LPs).

Why: PGLearn's economic dispatch (``problem=ed``) is this case. Once its thermal slacks are out of the LP
(:mod:`hardlinear.rules.free_slack`) the loads enter one row, the balance, through the total load. The reduced
solver took 2,124 s at case2869_pegase (1,485 inputs) and would keep about 17 GB of per-input factors at
case6470_rte (3,601 inputs); the LP with one input has two columns of unknowns.

A cost-aware rule weighs more than the margin and keeps its own LP. The lifted rule is verified over every row of
the family in float64: in closed form over the box, and over a polytope also through ``s``'s certified range
(:func:`_interval_margins`, a bound that holds whatever HiGHS's tolerances).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from hardlinear.constraints.family import InputBox, JointlyLinearFamily
from hardlinear.rules.robust_lp import RuleSolution, solve_robust_lp
from hardlinear.rules.sparse_products import sparse_times_dense

log = logging.getLogger(__name__)

# Largest entry of B[:, 1:] - b a' allowed, relative to B[:, 1:]'s largest: rounding of a matrix whose rows are
# multiples of one another (~1e-16), far below any row a second input direction would move.
RANK_ONE_RTOL = 1e-12
# Rows of B[:, 1:] compared at a time (memory O(chunk k)).
CHUNK_ROWS = 4096


class NotRankOne(ValueError):
    """The LP's inputs do not enter through one functional (or move no row)."""


@dataclass(frozen=True)
class RankOneInputs:
    """``B_eq[:, 1:] = b_eq a'`` and ``B_ineq[:, 1:] = b_ineq a'``; ``interval`` is where ``s = a' xi`` ranges."""

    a: np.ndarray  # (k,), its largest entry 1 in absolute value
    b_eq: np.ndarray  # (m_eq,)
    b_ineq: np.ndarray  # (m_ineq,)
    interval: InputBox  # one input: the range of a' xi over the input set (functional_range)


def rank_one_inputs(family: JointlyLinearFamily) -> RankOneInputs | None:
    """The functional through which every input of ``family`` enters, with its range over the input set, or None
    where the input coefficients have rank other than one (to ``RANK_ONE_RTOL``) or are all zero."""
    if not isinstance(family, JointlyLinearFamily) or family.k == 0:
        return None
    parts = [np.asarray(family.B_eq[:, 1:]), np.asarray(family.B_ineq[:, 1:])]
    row_size = [np.abs(p).max(axis=1) if p.size else np.zeros(0) for p in parts]
    scale = max((float(s.max()) for s in row_size if s.size), default=0.0)
    if scale == 0.0:  # no input moves any row: nothing to reduce
        return None
    which = 0 if row_size[0].size and row_size[0].max() == scale else 1
    pivot = parts[which][int(np.argmax(row_size[which]))]
    a = pivot / np.abs(pivot).max()
    coefficients = []
    for part in parts:
        b = np.empty(part.shape[0])
        for start in range(0, part.shape[0], CHUNK_ROWS):
            block = part[start:start + CHUNK_ROWS]
            b[start:start + CHUNK_ROWS] = block @ a / (a @ a)
            if np.abs(block - np.outer(b[start:start + CHUNK_ROWS], a)).max(initial=0.0) > RANK_ONE_RTOL * scale:
                return None
        coefficients.append(b)
    low, high = functional_range(a, family.box, getattr(family, "polytope", None))
    return RankOneInputs(a, coefficients[0], coefficients[1], InputBox(np.array([low]), np.array([high])))


def functional_range(a: np.ndarray, box: InputBox, polytope=None) -> tuple[float, float]:
    """``(s_lo, s_hi)`` bounding ``a' xi`` over the box, or over the polytope cut by it: in closed form over the box;
    over the polytope by HiGHS, each end then certified by its duals ``lam >= 0`` (for every ``xi`` of the set,
    ``a' xi = lam' A xi + r' xi <= lam' b + max(r' lo, r' hi)`` entry-wise with ``r = a - A' lam``), so it is a bound
    whatever the LP solver's tolerances. A bound a little outside the true range only asks the rule to cover
    more."""
    centre, spread = float(a @ box.mid), float(np.abs(a) @ box.radius)
    if polytope is None:
        return centre - spread, centre + spread
    from scipy.optimize import linprog

    ends = []
    for sign in (1.0, -1.0):  # the largest of sign * a' xi
        z = sign * a
        res = linprog(-z, A_ub=polytope.A, b_ub=polytope.b, bounds=list(zip(box.lo, box.hi)), method="highs")
        if res.status != 0:
            raise RuntimeError(f"HiGHS failed on the input functional's range over the input polytope: {res.message}")
        lam = np.clip(-np.asarray(res.ineqlin.marginals), 0.0, None)
        r = z - polytope.A.T @ lam
        certified = float(lam @ polytope.b + np.maximum(r * box.lo, r * box.hi).sum())
        ends.append(min(certified, float(z @ box.mid + np.abs(z) @ box.radius)))  # the box's bound holds too
    return -ends[1], ends[0]


def one_input_family(family: JointlyLinearFamily, inputs: RankOneInputs) -> JointlyLinearFamily:
    """The same rows with the one input ``s = a' xi``."""
    return JointlyLinearFamily(
        box=inputs.interval, G=family.G, H=family.H,
        B_eq=np.c_[family.B_eq[:, 0], inputs.b_eq], B_ineq=np.c_[family.B_ineq[:, 0], inputs.b_ineq],
    )


def lift(F_one: np.ndarray, inputs: RankOneInputs) -> np.ndarray:
    """``F: (n, k + 1)`` of ``y = f_0 + f_1 a' xi`` from the one-input rule ``F_one = (f_0, f_1)``."""
    return np.c_[F_one[:, 0], np.outer(F_one[:, 1], inputs.a)]


def _reproject(F: np.ndarray, family: JointlyLinearFamily) -> np.ndarray:
    """``F`` moved by least squares onto ``G F = B_eq`` (the fit ``b a'`` of ``B``'s input columns is exact only to
    rounding)."""
    if not family.m_eq:
        return F
    G = sp.csr_matrix(family.G).toarray()
    correction, *_ = np.linalg.lstsq(G, G @ F - family.B_eq, rcond=None)
    return F - correction


def solve_rank_one(family: JointlyLinearFamily, weights: np.ndarray, solver: str = "clarabel", **lp) -> RuleSolution:
    """The margin rule of ``family`` through its one-input LP (``solver``: an LP solver of
    :func:`~hardlinear.rules.robust_lp.solve_robust_lp`, ``lp``: its options), lifted and verified over every row
    of ``family`` in float64 (over its box, and over its polytope through ``a' xi``'s certified range). Raises
    :class:`NotRankOne` where the structure does not hold."""
    start = time.perf_counter()
    inputs = rank_one_inputs(family)
    if inputs is None:
        raise NotRankOne(
            "rule_solver='rank_one' needs every input to enter the rows through one linear functional "
            f"(B[:, 1:] = b a' to {RANK_ONE_RTOL:g} relative); this LP's {family.k} inputs do not, or move no row: "
            "use rule_solver='auto'"
        )
    one = solve_robust_lp(one_input_family(family, inputs), weights, solver, **lp)
    F = _reproject(lift(one.F, inputs), family)
    margins = _verified_margins(F, family, weights, inputs)
    t_star = float(margins.min()) if margins.size else float("inf")
    info = dict(
        one.info, rank_one=True, inputs=family.k, one_input_t_star=one.t_star, one_input_solver=solver,
        eq_residual=float(np.abs(family.G @ F - family.B_eq).max() / (1.0 + np.abs(family.B_eq).max())) if family.m_eq else 0.0,
        max_abs_coefficient=float(np.abs(F).max()) if F.size else 0.0,
    )
    log.info(
        "decision rule through one input (s = a'xi over [%.6g, %.6g], %d inputs): t*=%.6g, verified %.6g over %d rows",
        inputs.interval.lo[0], inputs.interval.hi[0], family.k, one.t_star, t_star, family.m_ineq,
    )
    return RuleSolution(F, t_star, margins, one.status, "rank_one", time.perf_counter() - start, info)


def _verified_margins(F: np.ndarray, family: JointlyLinearFamily, weights: np.ndarray, inputs: RankOneInputs) -> np.ndarray:
    """``(m_ineq,)``: each row's worst margin over the box in closed form (as
    :func:`~hardlinear.rules.reduced.verified_row_margins_chunked`), and over a polytope the larger of that and a
    bound through ``s = a' xi``: the row's residual ``c + d a' xi + e' xi`` (``d a'`` its fit to ``a``, ``e`` what is
    left, rounding) is at least ``c + min(d s_lo, d s_hi) - |e|' max(|lo|, |hi|)`` wherever ``a' xi`` lies in
    ``inputs.interval`` (certified). One product ``H F`` per chunk of rows serves both."""
    box, a = family.box, inputs.a
    low, high = float(inputs.interval.lo[0]), float(inputs.interval.hi[0])
    reach = np.maximum(np.abs(box.lo), np.abs(box.hi))
    over_polytope = getattr(family, "polytope", None) is not None
    H = sp.csr_matrix(family.H)
    out = np.empty(family.m_ineq)
    for start in range(0, family.m_ineq, CHUNK_ROWS):
        stop = min(start + CHUNK_ROWS, family.m_ineq)
        Z = family.B_ineq[start:stop] - sparse_times_dense(H[start:stop], F)
        worst = Z[:, 0] + Z[:, 1:] @ box.mid - np.abs(Z[:, 1:]) @ box.radius
        if over_polytope:  # the box's worst case is a lower bound over the set: tighten it
            d = Z[:, 1:] @ a / (a @ a)
            rest = np.abs(Z[:, 1:] - np.outer(d, a)) @ reach
            worst = np.maximum(worst, Z[:, 0] + np.minimum(d * low, d * high) - rest)
        out[start:stop] = worst / weights[start:stop]
    return out
