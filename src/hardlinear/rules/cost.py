"""The expected objective of an affine decision rule over the input box (the cost-aware rule's objective).

A rule ``y = F x`` with ``x = (1, xi)`` and ``xi`` uniform on the box ``[lo, hi]`` has, in closed form::

    E[x]    = (1, mid)                                   mid = (lo + hi) / 2
    E[x x'] = E[x] E[x]' + diag(0, r^2 / 3)               r = (hi - lo) / 2
    E[c' y + 1/2 y' Q y] = c' F E[x] + 1/2 tr(F' Q F E[x x'])

so the expected objective of a rule is a convex quadratic (linear for an LP objective) in ``F``: the
cost-aware rule minimises it subject to a guaranteed margin ``t >= rho t*`` (see
:func:`hardlinear.rules.robust_lp.solve_robust_lp` and docs/cost_aware_rule.md).

An input-dependent cost ``c(x) = c0 + C xi = [c0 | C] x`` stays closed form: ``E[c(x)' F x] = tr([c0 | C]' F E[x x'])``.
Over an input polytope the moments are those of the uniform distribution over it, estimated once from seeded
samples (or the mean of the user's own inputs): ``RuleCost.moments`` then replaces the box's closed form.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from hardlinear.constraints.family import InputBox
from hardlinear.constraints.moments import input_moments, sample_moments  # noqa: F401 - re-exported

RULE_OBJECTIVES = ("margin", "cost")


@dataclass(frozen=True)
class RuleCost:
    """``f(y) = c' y + 1/2 y' Q y`` on the rule's (original) variables; ``Q`` None for a linear objective."""

    c: np.ndarray
    Q: sp.csr_matrix | None = None
    C: np.ndarray | None = None  # (n, k): the cost's input part, c(x) = c + C xi
    moments: tuple[np.ndarray, np.ndarray] | None = None  # (E[x]: (K,), E[x x']: (K, K)); None: uniform on the box

    def __post_init__(self) -> None:
        c = np.asarray(self.c, dtype=np.float64).reshape(-1)
        if not np.all(np.isfinite(c)):
            raise ValueError("the rule cost's c must be finite")
        object.__setattr__(self, "c", c)
        if self.C is not None:
            C = np.asarray(self.C, dtype=np.float64)
            if C.ndim != 2 or C.shape[0] != c.size or not np.all(np.isfinite(C)):
                raise ValueError(f"the rule cost's C must be a finite ({c.size}, k) matrix; got shape {C.shape}")
            object.__setattr__(self, "C", C if np.any(C) else None)
        if self.Q is not None:
            Q = sp.csr_matrix(self.Q, dtype=np.float64)
            if Q.shape != (c.size, c.size):
                raise ValueError(f"the rule cost's Q must be ({c.size}, {c.size}) like c; got {Q.shape}")
            object.__setattr__(self, "Q", Q if Q.nnz else None)

    @property
    def is_quadratic(self) -> bool:
        return self.Q is not None


def cost_moments(cost: RuleCost, box: InputBox) -> tuple[np.ndarray, np.ndarray]:
    """The moments the cost's expectation uses: its own (a polytope, given inputs), else the box's closed form."""
    return cost.moments if cost.moments is not None else input_moments(box)


def cost_matrix(cost: RuleCost, k: int) -> np.ndarray:
    """``[c0 | C]: (n, k + 1)`` with ``c(x) = [c0 | C] x``."""
    out = np.zeros((cost.c.size, k + 1))
    out[:, 0] = cost.c
    if cost.C is not None:
        if cost.C.shape[1] != k:
            raise ValueError(f"the rule cost's C has {cost.C.shape[1]} columns; the inputs have k = {k}")
        out[:, 1:] = cost.C
    return out


def expected_cost(F: np.ndarray, cost: RuleCost, box: InputBox) -> float:
    """``E[c(x)' F x + 1/2 (F x)' Q (F x)]`` over the input set in float64, in closed form (``F: (n, K)``)."""
    mean, second = cost_moments(cost, box)
    value = float(np.sum(cost_matrix(cost, box.k) * (F @ second)))  # tr([c0 | C]' F E[x x'])
    if cost.Q is not None:
        value += 0.5 * float(np.sum((cost.Q @ F) * (F @ second)))
    return value
