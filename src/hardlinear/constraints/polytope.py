"""An input polytope ``{xi : A xi <= b}`` (optionally cut by a box) and the LPs the rule needs over it.

The robust LP over a box has a closed-form worst case per row; over a polytope the worst case of an affine
slack ``z_0 + z'xi`` is itself an LP, ``min_{A xi <= b} z'xi``, whose dual is ``max -b'lam`` s.t. ``A'lam = -z``,
``lam >= 0``. The rule's LP carries one such multiplier vector per inequality row
(:mod:`hardlinear.rules.robust_lp`); the verification after solving calls :func:`support` (HiGHS, all rows in
one block-diagonal LP) and turns each row's dual into a bound that holds whatever the LP's tolerances
(:func:`support`'s docstring). Everything is float64.

The polytope is checked when it is built (:func:`make_input_set`): shapes, finiteness, a non-empty interior (the
Chebyshev ball, one LP) and boundedness (its bounding box, 2k LPs), each with a message that names the fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
import torch

# A Chebyshev radius below this fraction of the bounding box's largest half-width counts as an empty interior.
FLAT_TOL = 1e-9
# Samples of the uniform distribution over the polytope for the cost-aware rule's expectation (seeded).
MOMENT_SAMPLES = 20000


@dataclass(frozen=True, eq=False)
class InputPolytope:
    """``{xi : A xi <= b}`` with ``A: (p, k)``, ``b: (p,)``, the user's rows. The input set is this polytope cut by
    the family's box (its bounding box, cut by the user's box when one was given): bounded, with a non-empty
    interior (checked by :func:`make_input_set`). Every LP over the set appends the box's rows."""

    A: np.ndarray
    b: np.ndarray
    _torch: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def k(self) -> int:
        return int(self.A.shape[1])

    def violation(self, xi: torch.Tensor) -> torch.Tensor:
        """``(B, k) -> (B,)``: the largest ``(A xi - b)_i / ||A_i||`` (a distance outside; ``<= 0`` inside)."""
        key = (xi.device, xi.dtype)
        if key not in self._torch:
            norms = np.linalg.norm(self.A, axis=1)
            self._torch[key] = (
                torch.as_tensor(self.A / norms[:, None], dtype=xi.dtype, device=xi.device),
                torch.as_tensor(self.b / norms, dtype=xi.dtype, device=xi.device),
            )
        A, b = self._torch[key]
        return (xi @ A.T - b).amax(dim=1)

    def contains(self, xi: np.ndarray, tol: float = 1e-9) -> np.ndarray:
        """``(N, k) -> (N,)`` bool: inside up to ``tol`` (relative to ``1 + |b|`` per row)."""
        xi = np.atleast_2d(np.asarray(xi, dtype=np.float64))
        return np.all(xi @ self.A.T - self.b <= tol * (1.0 + np.abs(self.b)), axis=1)

    def sample(self, n: int, lo: np.ndarray, hi: np.ndarray, seed: int = 0) -> np.ndarray:
        """``(n, k)`` uniform samples, by rejection from the bounding box ``[lo, hi]`` (seeded)."""
        rng = np.random.default_rng(seed)
        out, drawn = [], 0
        while sum(len(o) for o in out) < n:
            batch = lo + rng.random((max(4 * n, 1024), self.k)) * (hi - lo)
            drawn += len(batch)
            out.append(batch[self.contains(batch, tol=0.0)])
            if drawn >= 200 * n and sum(len(o) for o in out) < 0.01 * drawn:
                raise ValueError(
                    f"the input polytope fills under 1% of its bounding box ({sum(len(o) for o in out)} of {drawn} "
                    "samples inside): pass inputs= (samples of the inputs, e.g. the training set) for the "
                    "cost-aware rule's expectation"
                )
        return np.concatenate(out)[:n]

    def fingerprint_parts(self) -> list[np.ndarray]:
        return [self.A, self.b, np.asarray(self.A.shape)]


def make_input_set(
    A: np.ndarray, b: np.ndarray, lo: np.ndarray | None, hi: np.ndarray | None
) -> tuple[InputPolytope, np.ndarray, np.ndarray]:
    """Check ``{xi : A xi <= b}`` (cut by ``[lo, hi]`` when given) and return it with its bounding box.

    Raises ``ValueError`` naming the fix for: bad shapes, non-finite entries, a zero row, an empty set, an empty
    interior (the set lies in a hyperplane), and an unbounded set (naming an input it is unbounded along).
    """
    from scipy.optimize import linprog

    A = np.asarray(A, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64).reshape(-1)
    if A.ndim != 2:
        raise ValueError(f"A_in must be a (rows, k) matrix; got shape {A.shape}")
    k = A.shape[1]
    if b.shape != (A.shape[0],):
        raise ValueError(f"b_in has {b.size} entries but A_in has {A.shape[0]} rows: one bound per row of A_in")
    if lo is not None and lo.shape != (k,):
        raise ValueError(f"A_in has {k} columns but lo/hi have {lo.size} entries: both must have k (one per input)")
    for name, arr in (("A_in", A), ("b_in", b)):
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} has a NaN or inf entry: every coefficient of the input polytope must be finite")
    zero = np.flatnonzero(np.linalg.norm(A, axis=1) == 0)
    if zero.size:
        raise ValueError(f"rows {zero[:10].tolist()} of A_in are zero: remove them (0 <= b_in says nothing about the input)")
    rows_A, rows_b = A, b  # the user's rows; the box's are appended for the checks only (the bounding box has them)
    if lo is not None:
        A = np.vstack([A, np.eye(k), -np.eye(k)])
        b = np.concatenate([b, hi, -lo])
    empty = (
        "the input polytope {xi : A_in xi <= b_in}" + (" within [lo, hi]" if lo is not None else "")
        + " is empty: no input satisfies every row; check the signs of A_in and b_in (rows read A_in xi <= b_in)"
    )
    box_lo, box_hi = np.empty(k), np.empty(k)
    for j in range(k):  # the bounding box: 2k LPs (an empty set or an unbounded one shows here first)
        for sign, store in ((1.0, box_lo), (-1.0, box_hi)):
            cost = np.zeros(k)
            cost[j] = sign
            r = linprog(cost, A_ub=A, b_ub=b, bounds=[(None, None)] * k, method="highs")
            if r.status == 2:
                raise ValueError(empty)
            if r.status == 3:
                raise ValueError(
                    f"the input polytope is unbounded along input {j} ({'below' if sign > 0 else 'above'}): the rule "
                    "needs a bounded input set; give lo and hi, or add rows to A_in that bound every input"
                )
            if r.status != 0:
                raise RuntimeError(f"HiGHS failed on the input polytope's bounding box (input {j}: {r.message})")
            store[j] = sign * r.fun
    # the Chebyshev ball: max r s.t. A xi + ||A_i|| r <= b (bounded: the set is)
    norms = np.linalg.norm(A, axis=1)
    res = linprog(np.r_[np.zeros(k), -1.0], A_ub=np.hstack([A, norms[:, None]]), b_ub=b, bounds=[(None, None)] * (k + 1), method="highs")
    if res.status != 0:
        raise RuntimeError(f"HiGHS could not find the input polytope's Chebyshev centre (status {res.status}: {res.message})")
    radius = -float(res.fun)
    width = float(np.max(box_hi - box_lo)) if k else 0.0
    if radius <= FLAT_TOL * max(width, 1e-300):
        raise ValueError(
            f"the input polytope has an empty interior (its largest inscribed ball has radius {radius:.3g}): it lies in "
            "a hyperplane, i.e. some inputs are determined by others; drop those inputs, or widen b_in"
        )
    return InputPolytope(rows_A, rows_b), box_lo, box_hi


def bounded_input_set(
    A: np.ndarray, b: np.ndarray, lo: np.ndarray | None, hi: np.ndarray | None
) -> tuple[InputPolytope, np.ndarray, np.ndarray]:
    """:func:`make_input_set`, with the bounding box widened by 1e-9 relative (the LPs may place it inside the
    true one by their tolerance; every worst case over the set relies on ``|u| <= 1`` on it) and cut by the box."""
    polytope, blo, bhi = make_input_set(A, b, lo, hi)
    pad = 1e-9 * (1.0 + np.maximum(np.abs(blo), np.abs(bhi)))
    blo, bhi = blo - pad, bhi + pad
    if lo is not None:
        blo, bhi = np.maximum(blo, lo), np.minimum(bhi, hi)
    return polytope, blo, bhi


def sample_inside(polytope: InputPolytope, box, n: int, generator: torch.Generator | None, dtype: torch.dtype) -> torch.Tensor:
    """``(n, k)`` inputs uniform on the polytope (cut by ``box``), by rejection from ``box.sample`` with the
    caller's generator (reproducible like the box's sampling)."""
    kept, drawn = [], 0
    while sum(len(t) for t in kept) < n:
        xi = box.sample(max(2 * n, 256), generator=generator, dtype=torch.float64)
        drawn += len(xi)
        kept.append(xi[torch.as_tensor(polytope.contains(xi.numpy(), tol=0.0))])
        if drawn >= 200 * max(n, 256) and sum(len(t) for t in kept) < 0.01 * drawn:
            raise ValueError(
                "the input polytope fills under 1% of its bounding box: sampling it by rejection is too slow; give the "
                "inputs of each split instead (train_inputs, val_inputs, test_inputs)"
            )
    return torch.cat(kept)[:n].to(dtype)


def as_slab(polytope: InputPolytope) -> tuple[np.ndarray, float, float] | None:
    """``(a, low, high)`` when the polytope is one slab ``low <= a' xi <= high`` (two rows, the second the first's
    negative, as ``problem=ed``'s ``input_set=recipe_total``), else None."""
    A, b = np.asarray(polytope.A, dtype=np.float64), np.asarray(polytope.b, dtype=np.float64)
    if A.shape[0] != 2 or not np.array_equal(A[1], -A[0]):
        return None
    low, high = -float(b[1]), float(b[0])
    if not low <= high:
        raise ValueError(f"the input slab {low:g} <= a' xi <= {high:g} is empty")
    return A[0], low, high


SLAB_CHUNK_ROWS = 512
"""Rows of ``Z`` sorted at a time by :func:`slab_support` (each row's ``k`` breakpoints: ``O(chunk k)`` memory)."""


def slab_support(Z: np.ndarray, a: np.ndarray, low: float, high: float) -> np.ndarray:
    """``(r,)``: for each row ``z`` of ``Z: (r, q)``, ``max {z'u : |u_i| <= 1, low <= a'u <= high}`` up to float64
    rounding, as a bound that holds exactly (the slab meets the cube: the caller's set is not empty).

    Why not :func:`support`: its block-diagonal LP has ``r`` copies of the set's rows (at case9241_pegase 51,037
    rows of 4,862 inputs: a 7.4 GB matrix, refused). For a slab the LP's dual has one free multiplier ``mu``:
    every ``u`` of the set has ``z'u = mu a'u + (z - mu a)'u <= max(mu high, mu low) + |z - mu a|_1``, for any
    ``mu``, and the least such bound is the maximum (LP duality). As a function of ``mu`` it is
    ``c mu + sum_j w_j |t_j - mu|`` plus a constant, with ``c = (high + low) / 2``, the points
    ``t_j = z_j / a_j`` (weights ``|a_j|``) and ``0`` (weight ``(high - low) / 2``): convex and piecewise linear,
    least at the first sorted point where its slope ``c + 2 (weight up to it) - (all weight)`` turns
    nonnegative. The bound is then evaluated at that ``mu`` from its definition, so it holds whatever ``mu``'s
    rounding."""
    Z, a = np.asarray(Z, dtype=np.float64), np.asarray(a, dtype=np.float64)
    on = a != 0
    weight = np.r_[np.abs(a[on]), 0.5 * (high - low)]
    c, total = 0.5 * (high + low), weight.sum()
    out = np.empty(Z.shape[0])
    for s in range(0, Z.shape[0], SLAB_CHUNK_ROWS):
        z = Z[s : s + SLAB_CHUNK_ROWS]
        points = np.c_[z[:, on] / a[on], np.zeros(len(z))]
        order = np.argsort(points, axis=1)
        below = np.cumsum(weight[order], axis=1)
        first = np.argmax(c + 2.0 * below - total >= 0.0, axis=1)  # the last point's slope c + total >= 0
        mu = np.take_along_axis(points, order, axis=1)[np.arange(len(z)), first]
        out[s : s + len(z)] = np.maximum(mu * high, mu * low) + np.abs(z - mu[:, None] * a).sum(axis=1)
    return out


def support(Z: np.ndarray, A: np.ndarray, b: np.ndarray, bound: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(upper, gap)``: for each row ``z`` of ``Z: (r, q)``, a bound ``upper >= max {z'u : A u <= b}`` that
    holds exactly (up to float64 rounding of the sums), and its distance ``gap >= 0`` to the LP's primal value.

    All rows are one block-diagonal HiGHS LP. From a row's dual ``lam`` (clipped to ``>= 0``), for every ``u`` in
    the set ``z'u = lam'A u + (z - A'lam)'u <= lam'b + |z - A'lam|' bound``, where ``bound >= |u|`` entry-wise on
    the set (``bound: (q,)``, from the bounding box): so the bound does not depend on HiGHS's tolerances
    (primal and dual feasibility 1e-7 by default); the gap (typically < 1e-9 relative) says how tight it is.
    """
    from scipy.optimize import linprog

    r, q = Z.shape
    if r == 0:
        return np.zeros(0), np.zeros(0)
    p = A.shape[0]
    big = sp.kron(sp.identity(r, format="csr"), sp.csr_matrix(A), format="csr")
    res = linprog(-Z.reshape(-1), A_ub=big, b_ub=np.tile(b, r), bounds=[(None, None)] * (r * q), method="highs")
    if res.status != 0:
        raise RuntimeError(f"HiGHS failed on the worst case over the input polytope: {res.message}")
    lam = np.clip(-np.asarray(res.ineqlin.marginals).reshape(r, p), 0.0, None)
    resid = Z - lam @ A
    upper = lam @ b + np.abs(resid) @ bound
    primal = (Z * res.x.reshape(r, q)).sum(axis=1)
    return upper, np.maximum(upper - primal, 0.0)
