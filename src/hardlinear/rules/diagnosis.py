"""Why no decision rule exists: is the problem itself infeasible somewhere in the input set, or only no affine rule?

Two different failures end in the same ``t* <= 0``. (1) At some input the constraints have no solution at all
(``C(theta)`` is empty): no method can be feasible there, and the fix is the input set or the constraints. (2) Every
input has feasible points, but no single affine ``y = F (1, theta)`` keeps a positive margin over the whole set
(e.g. the feasible point must follow a product of inputs): then a smaller or a polytope input set helps.

:func:`find_infeasible_point` looks for (1) at the points where it is likeliest: the corners of the box (or the
vertices of the polytope) that make each right-hand side ``h_i(theta)``, ``+-g_i(theta)`` and the rule's own binding
slack smallest, at most :data:`MAX_POINTS` of them. At each it solves the feasibility LP (HiGHS, through scipy)

    min s   s.t.   |G y - g(theta)| <= s,   H y - h(theta) <= s,   s >= -1

whose optimum ``s*`` is the smallest uniform violation: ``s* > tol`` (``TOL_REL`` relative to the right-hand side's
size) means no ``y`` satisfies the constraints at ``theta``. The rows with a nonzero dual in that LP are the ones in
conflict (a Farkas certificate), named in the message. A search, not a proof: finding no such point does not prove
the set is feasible everywhere (only its corners are checked), and the message says "at every point checked".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

MAX_POINTS = 64
"""Most candidate points whose feasibility LP is solved (each is one LP with ``n + 1`` variables)."""
MAX_SIZE = 200_000
"""Largest ``n * (m_eq + m_ineq)`` searched (larger problems: the search is skipped, and the message says so)."""
TOL_REL = 1e-9


@dataclass(frozen=True)
class InfeasiblePoint:
    """An input ``theta`` where no ``y`` satisfies the constraints: ``violation`` the LP's ``s*``, ``eq_rows`` and
    ``ineq_rows`` the rows in conflict (nonzero duals)."""

    theta: np.ndarray
    violation: float
    eq_rows: list[int]
    ineq_rows: list[int]
    checked: int
    at_centre: bool = False  # the centre of the input set has no solution either: no input set helps


def candidate_points(family, rule_F: np.ndarray | None = None, binding_row: int = -1) -> list[np.ndarray]:
    """The points of the input set that minimise each right-hand side (and the rule's binding slack, first), unique,
    at most :data:`MAX_POINTS`: corners of the box, or vertices of the polytope."""
    B_eq, B_ineq = np.asarray(family.B_eq, dtype=np.float64), np.asarray(family.B_ineq, dtype=np.float64)
    directions = []
    if rule_F is not None and 0 <= binding_row < family.m_ineq:  # the rule's binding slack (B_ineq - H F)_b x
        H = sp.csr_matrix(family.H)
        directions.append(np.asarray(B_ineq[binding_row] - H[binding_row] @ rule_F).ravel()[1:])
    directions += [row[1:] for row in B_ineq] + [row[1:] for row in B_eq] + [-row[1:] for row in B_eq]
    points, seen = [], set()
    for d in directions:
        if not np.any(d):
            continue
        theta = _minimiser(family, d)
        key = np.round(theta, 12).tobytes()
        if key not in seen:
            seen.add(key)
            points.append(theta)
        if len(points) >= MAX_POINTS:
            break
    return points or [family.box.mid.copy()]


def _minimiser(family, d: np.ndarray) -> np.ndarray:
    """``argmin_{theta in X} d' theta``: a corner of the box in closed form, a vertex of the polytope by an LP."""
    box = family.box
    polytope = getattr(family, "polytope", None)
    if polytope is None:
        return np.where(d > 0, box.lo, box.hi)
    from scipy.optimize import linprog

    res = linprog(d, A_ub=polytope.A, b_ub=polytope.b, bounds=list(zip(box.lo, box.hi, strict=True)), method="highs")
    return np.asarray(res.x) if res.status == 0 else box.mid.copy()


def violation_at(family, theta: np.ndarray) -> tuple[float, list[int], list[int]]:
    """``(s*, eq rows, ineq rows)`` of the feasibility LP at ``theta`` (module docstring); rows with a nonzero dual."""
    from scipy.optimize import linprog

    x = np.r_[1.0, theta]
    G, H = sp.csr_matrix(family.G), sp.csr_matrix(family.H)
    g, h = np.asarray(family.B_eq) @ x, np.asarray(family.B_ineq) @ x
    m_eq, m_ineq, n = G.shape[0], H.shape[0], family.n
    ones = lambda m: sp.csr_matrix(np.ones((m, 1)))  # noqa: E731 - the violation's column
    A = sp.vstack([sp.hstack([G, -ones(m_eq)]), sp.hstack([-G, -ones(m_eq)]), sp.hstack([H, -ones(m_ineq)])]).tocsr()
    b = np.r_[g, -g, h]
    c = np.r_[np.zeros(n), 1.0]
    res = linprog(c, A_ub=A, b_ub=b, bounds=[(None, None)] * n + [(-1.0, None)], method="highs")
    if res.status != 0:
        return float("nan"), [], []
    dual = np.abs(np.asarray(res.ineqlin.marginals))
    cut = 1e-9 * max(1.0, float(dual.max(initial=0.0)))
    eq_rows = sorted({int(i % m_eq) for i in np.flatnonzero(dual[: 2 * m_eq] > cut)}) if m_eq else []
    ineq_rows = [int(i) for i in np.flatnonzero(dual[2 * m_eq :] > cut)]
    return float(res.x[-1]), eq_rows, ineq_rows


def find_infeasible_point(family, rule_F: np.ndarray | None = None, binding_row: int = -1) -> tuple[InfeasiblePoint | None, int]:
    """``(the worst infeasible point found or None, points checked)`` for a jointly linear family; ``(None, 0)``
    where the search does not apply (an input-dependent left-hand side) or the problem is too large."""
    if getattr(family, "input_dependent_lhs", False) or family.n * (family.m_eq + family.m_ineq) > MAX_SIZE:
        return None, 0
    points = candidate_points(family, rule_F, binding_row)
    scale = 1.0 + max(float(np.abs(family.B_eq).max(initial=0.0)), float(np.abs(family.B_ineq).max(initial=0.0)))
    worst = None
    for theta in points:
        s, eq_rows, ineq_rows = violation_at(family, theta)
        if s > TOL_REL * scale and (worst is None or s > worst.violation):
            worst = InfeasiblePoint(theta, s, eq_rows, ineq_rows, len(points))
    if worst is not None:
        centre = getattr(family, "polytope", None)
        centre = family.box.mid if centre is None else _minimiser(family, np.zeros(family.k))
        s, _, _ = violation_at(family, centre)
        worst = InfeasiblePoint(worst.theta, worst.violation, worst.eq_rows, worst.ineq_rows, worst.checked,
                                at_centre=bool(s > TOL_REL * scale))
    return worst, len(points)
