"""The expected objective of an affine decision rule over the input box (the cost-aware rule's objective).

A rule ``y = F x`` with ``x = (1, xi)`` and ``xi`` uniform on the box ``[lo, hi]`` has, in closed form::

    E[x]    = (1, mid)                                   mid = (lo + hi) / 2
    E[x x'] = E[x] E[x]' + diag(0, r^2 / 3)               r = (hi - lo) / 2
    E[c' y + 1/2 y' Q y] = c' F E[x] + 1/2 tr(F' Q F E[x x'])

so the expected objective of a rule is a convex quadratic (linear for an LP objective) in ``F``: the
cost-aware rule minimises it subject to a guaranteed margin ``t >= rho t*`` (see
:func:`hardlinear.layers.robust_lp.solve_robust_lp` and docs/cost_aware_rule.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from hardlinear.constraints import InputBox

RULE_OBJECTIVES = ("margin", "cost")


@dataclass(frozen=True)
class RuleCost:
    """``f(y) = c' y + 1/2 y' Q y`` on the rule's (original) variables; ``Q`` None for a linear objective."""

    c: np.ndarray
    Q: sp.csr_matrix | None = None

    def __post_init__(self) -> None:
        c = np.asarray(self.c, dtype=np.float64).reshape(-1)
        if not np.all(np.isfinite(c)):
            raise ValueError("the rule cost's c must be finite")
        object.__setattr__(self, "c", c)
        if self.Q is not None:
            Q = sp.csr_matrix(self.Q, dtype=np.float64)
            if Q.shape != (c.size, c.size):
                raise ValueError(f"the rule cost's Q must be ({c.size}, {c.size}) like c; got {Q.shape}")
            object.__setattr__(self, "Q", Q if Q.nnz else None)

    @property
    def is_quadratic(self) -> bool:
        return self.Q is not None


def input_moments(box: InputBox) -> tuple[np.ndarray, np.ndarray]:
    """``(E[x]: (K,), E[x x']: (K, K))`` for ``x = (1, xi)``, ``xi`` uniform on ``box``."""
    mean = np.concatenate([[1.0], box.mid])
    second = np.outer(mean, mean)
    second[1:, 1:] += np.diag(box.radius**2 / 3.0)
    return mean, second


def expected_cost(F: np.ndarray, cost: RuleCost, box: InputBox) -> float:
    """``E[f(F x)]`` over the box in float64, in closed form (``F: (n, K)``)."""
    mean, second = input_moments(box)
    value = float(cost.c @ F @ mean)
    if cost.Q is not None:
        value += 0.5 * float(np.sum((cost.Q @ F) * (F @ second)))
    return value
