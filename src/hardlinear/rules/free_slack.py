"""Free slack columns taken out of the robust LP before it is solved, and put back in closed form after.

A variable is a *free slack* when no equality touches it and every inequality row it appears in has a negative
coefficient on it: raising it only relaxes rows (PGLearn's thermal slack ``df``, one per limited line of the
economic dispatch, ``+-PTDF_e Ag pg - df_e <= smax_e +- PTDF_e pd(x)`` and ``-df_e <= 0``). Every row that holds
one can then be met with any margin by a large enough constant slack, so the robust LP's optimum ``t*`` is that of
the LP without those columns and rows: a rule of the smaller LP extends (constant slacks, below) to one of the
whole LP with the same margin, and the whole LP's optimal rule restricted to the other variables solves the
smaller one (it has a subset of the rows). The smaller LP is what gets solved.

Why: at case1354_pegase the 2,250 thermal slacks were 90 % of the reduced solver's null space; its per-input
Cholesky blocks of 2,250 x 2,250 would have needed 27 GB, so every preconditioner application refactored them and
one interior-point iteration took over 18 minutes (docs/peer_methods.md). Without them the null space is the
generators' (about 260).

The slacks come back as constants ``D_j``: each dropped row ``r`` needs ``sum_j |H_rj| D_j >= need_r``, with
``need_r`` the worst case over the box of the row's other terms plus ``t* w_r``, and
``D_j = max(0, max_r need_r / |H_rj|)`` meets every such row by its own slack alone (the others only add). A pad
of ``PAD`` relative to the row's terms keeps rounding from putting a dropped row below ``t*``. The caller verifies
the completed rule over every row, as it does any rule (``decision_rule._with_free_slacks``).

Applies to the margin rule of a jointly linear family. The cost-aware rule keeps the whole LP (there a slack's value
is what the cost weighs). Over an input polytope the smaller LP keeps the polytope, and the slacks' constants take
the worst case over the family's box, which holds the polytope: the dropped rows then hold with at least the margin
over the whole box (a little more slack than needed, and no LP per row).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from hardlinear.constraints.family import JointlyLinearFamily
from hardlinear.rules.sparse_products import sparse_times_dense

# Relative pad on each dropped row's requirement (times the row's terms' size): rounding in the verification
# of a row's margin is ~1e-16 of that size.
PAD = 1e-12


@dataclass(frozen=True)
class SlackElimination:
    """The free slack columns of a family and the LP without them."""

    slack_columns: np.ndarray  # (s,) indices of the free slacks
    kept_columns: np.ndarray  # (n - s,)
    kept_rows: np.ndarray  # inequality rows with no free slack
    dropped_rows: np.ndarray  # inequality rows with at least one
    family: JointlyLinearFamily  # the LP on kept_columns and kept_rows


def free_slack_columns(family: JointlyLinearFamily) -> np.ndarray:
    """``(s,)``: the variables that no equality row touches and that have a negative coefficient in every
    inequality row they appear in (at least one)."""
    G = sp.csc_matrix(family.G)
    H = sp.csc_matrix(family.H)
    in_eq = np.diff(G.indptr) > 0
    nonzero = np.diff(H.indptr) > 0
    positive = np.zeros(family.n, dtype=bool)
    cols = np.repeat(np.arange(family.n), np.diff(H.indptr))
    np.logical_or.at(positive, cols, H.data >= 0)  # an explicit zero counts as not relaxing: keep the column
    return np.flatnonzero(~in_eq & nonzero & ~positive)


def eliminate_free_slacks(family: JointlyLinearFamily) -> SlackElimination | None:
    """The elimination of ``family``'s free slacks, or None where there is none, or where nothing would be left
    to solve (no other variable or no row without a slack: the margin is then set by the slacks alone). Kept in the
    family's cache: the rule's cache key, the solver choice and the solve each ask for it."""
    if not isinstance(family, JointlyLinearFamily):
        return None
    if "free_slack_elimination" not in family._cache:
        family._cache["free_slack_elimination"] = _eliminate(family)
    return family._cache["free_slack_elimination"]


def _eliminate(family: JointlyLinearFamily) -> SlackElimination | None:
    slacks = free_slack_columns(family)
    if slacks.size == 0:
        return None
    H = sp.csr_matrix(family.H)
    touches = np.diff(sp.csr_matrix(H[:, slacks]).indptr) > 0  # rows holding at least one free slack
    kept_rows, dropped_rows = np.flatnonzero(~touches), np.flatnonzero(touches)
    kept_columns = np.setdiff1d(np.arange(family.n), slacks)
    if kept_columns.size == 0 or kept_rows.size == 0:
        return None
    smaller = replace(
        family,
        G=sp.csr_matrix(family.G)[:, kept_columns],
        H=H[kept_rows][:, kept_columns],
        B_ineq=family.B_ineq[kept_rows],
    )
    return SlackElimination(slacks, kept_columns, kept_rows, dropped_rows, smaller)


def complete_rule(
    elimination: SlackElimination, family: JointlyLinearFamily, F_kept: np.ndarray, t: float, weights: np.ndarray
) -> np.ndarray:
    """``F: (n, k + 1)``, the rule of the whole ``family`` from ``F_kept`` (the smaller LP's rule, margin ``t``):
    the free slacks as the smallest constants that give every dropped row a margin of at least ``t``
    (``weights``: the whole family's row weights)."""
    box = family.box
    F = np.zeros((family.n, family.k + 1))
    F[elimination.kept_columns] = F_kept
    rows = elimination.dropped_rows
    H = sp.csr_matrix(family.H)[rows]
    slack_part = sp.csr_matrix(H[:, elimination.slack_columns])
    other = sparse_times_dense(H[:, elimination.kept_columns], F_kept) - family.B_ineq[rows]  # (r, k + 1): row - rhs
    worst = other[:, 0] + other[:, 1:] @ box.mid + np.abs(other[:, 1:]) @ box.radius
    size = np.abs(other[:, 0]) + np.abs(other[:, 1:]) @ (np.abs(box.mid) + box.radius)
    need = worst + max(float(t), 0.0) * weights[rows] + PAD * (1.0 + size)
    coo = slack_part.tocoo()  # every entry negative (free_slack_columns)
    per_entry = need[coo.row] / -coo.data
    constants = np.zeros(len(elimination.slack_columns))
    np.maximum.at(constants, coo.col, per_entry)
    F[elimination.slack_columns, 0] = constants
    return F
