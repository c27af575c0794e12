"""The robust LP whose inputs all enter through one linear functional, solved as a robust LP with that one input.

When every row's input coefficients are multiples of one vector ``a`` (``B[:, 1:] = b a'`` over the equalities
and the inequalities together) and the input set is a box, the LP has an optimal rule that reads the inputs only
through ``s = a' xi``: ``y = f_0 + f_1 s``. Take any rule ``y = F_0 + F_1 xi`` with margin ``t``, the box
``xi = mid + rho u`` with ``|u| <= 1``, and

    beta = F_1 diag(rho) sign(a) / (rho' |a|),      f_0 = F_0 + (F_1 - beta a') mid.

- The equalities: ``G F_1 = b_eq a'`` gives ``G beta = b_eq``, and ``G f_0 = G F_0``; so ``G y = B_eq x`` for
  every input.
- An inequality row ``i`` with input part ``z = (H F_1 - b a')_i``: its value at the box's centre is unchanged,
  and its spread over the box, ``sum_j rho_j |z_j|``, becomes
  ``(rho' |a|) |H_i beta - b_i| = |sum_j rho_j sign(a_j) z_j| <= sum_j rho_j |z_j|``.

So the new rule has at least the margin ``t`` on every row, and the robust LP over ``k`` inputs has the optimum
``t*`` of the robust LP over the one input ``s`` in ``[a' mid - rho' |a|, a' mid + rho' |a|]``; the lifted rule
``F = (f_0, f_1 a')`` is one of the former's optimal rules.

Why: PGLearn's economic dispatch (``problem=ed``) is this case. Once its thermal slacks are out of the LP
(:mod:`hardlinear.rules.free_slack`) the loads enter one row, the balance, through the total load. The reduced
solver took 2,124 s at case2869_pegase (1,485 inputs) and would keep about 17 GB of per-input factors at
case6470_rte (3,601 inputs); the LP with one input has two columns of unknowns.

The structure holds only over a box: over a polytope the inputs' correlations can be worth hedging separately, and
the argument above uses the box's separate radii. A cost-aware rule weighs more than the margin and keeps its own
LP. The caller verifies the lifted rule over every row of the family in float64, as it does any rule.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from hardlinear.constraints import InputBox, JointlyLinearFamily
from hardlinear.rules.reduced import verified_row_margins_chunked
from hardlinear.rules.robust_lp import RuleSolution, solve_robust_lp

log = logging.getLogger(__name__)

# Largest entry of B[:, 1:] - b a' allowed, relative to B[:, 1:]'s largest: rounding of a matrix whose rows are
# multiples of one another (~1e-16), far below any row a second input direction would move.
RANK_ONE_RTOL = 1e-12
# Rows of B[:, 1:] compared at a time (memory O(chunk k)).
CHUNK_ROWS = 4096


class NotRankOne(ValueError):
    """The LP's inputs do not enter through one functional, or its input set is not a box."""


@dataclass(frozen=True)
class RankOneInputs:
    """``B_eq[:, 1:] = b_eq a'`` and ``B_ineq[:, 1:] = b_ineq a'``; ``interval`` is where ``s = a' xi`` ranges."""

    a: np.ndarray  # (k,), its largest entry 1 in absolute value
    b_eq: np.ndarray  # (m_eq,)
    b_ineq: np.ndarray  # (m_ineq,)
    interval: InputBox  # one input: [a' mid - rho' |a|, a' mid + rho' |a|]


def rank_one_inputs(family: JointlyLinearFamily) -> RankOneInputs | None:
    """The functional through which every input of ``family`` enters, or None where the input coefficients
    have rank other than one (to ``RANK_ONE_RTOL``) or the input set is a polytope."""
    if not isinstance(family, JointlyLinearFamily) or getattr(family, "polytope", None) is not None or family.k == 0:
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
    box = family.box
    centre, spread = float(a @ box.mid), float(np.abs(a) @ box.radius)
    return RankOneInputs(a, coefficients[0], coefficients[1], InputBox(np.array([centre - spread]), np.array([centre + spread])))


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
    of ``family`` over its box in float64. Raises :class:`NotRankOne` where the structure does not hold."""
    start = time.perf_counter()
    if getattr(family, "polytope", None) is not None:
        raise NotRankOne("rule_solver='rank_one' works over an input box; over an input polytope use rule_solver='auto'")
    inputs = rank_one_inputs(family)
    if inputs is None:
        raise NotRankOne(
            "rule_solver='rank_one' needs every input to enter the rows through one linear functional "
            f"(B[:, 1:] = b a' to {RANK_ONE_RTOL:g} relative); this LP's {family.k} inputs do not, or move no row: "
            "use rule_solver='auto'"
        )
    one = solve_robust_lp(one_input_family(family, inputs), weights, solver, **lp)
    F = _reproject(lift(one.F, inputs), family)
    margins = verified_row_margins_chunked(F, family.H, family.B_ineq, family.box, weights)
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
