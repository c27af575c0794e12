"""A local NLP solver (SciPy's SLSQP) for objectives no QP solver takes: DC3's ``1/2 y'Qy + c'y + s' sin(y)``.

Why SLSQP: it is in SciPy (nothing to install), handles linear equalities and inequalities with exact
gradients, and DC3's own reference (IPOPT) is also a local method. It finds a *local* optimum from its start:
the least-norm point ``G^+ g`` of the equalities (DC3 started IPOPT there), or the given warm start. Status
``"optimal"`` means SLSQP converged (``ftol``) and the point is feasible to ``feas_tol``; gaps measured against
it are against a local reference and may be negative. Everything is float64.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize

from hardlinear.solvers.base import COUNT, PREVIOUS, TOLERANCE, QPSolver, SolveResult, check_solver_options

DEFAULTS = {"ftol": 1e-10, "maxiter": 1000, "feas_tol": 1e-7}


class SLSQPSolver(QPSolver):
    name = "slsqp"
    supports_warm_start = True
    supports_nonconvex = True
    OPTIONS = {"ftol": TOLERANCE, "maxiter": COUNT, "feas_tol": TOLERANCE}

    def __init__(self, Q, c, G, H, sine: np.ndarray | None = None, **options) -> None:
        super().__init__(Q, c, G, H)
        check_solver_options(self.name, options, self.OPTIONS)
        self.settings = {**DEFAULTS, **options}
        self.sine = None if sine is None else np.asarray(sine, dtype=np.float64)
        self._last: np.ndarray | None = None

    def objective_value(self, y: np.ndarray) -> float:
        value = super().objective_value(y)
        return value + (float(self.sine @ np.sin(y)) if self.sine is not None else 0.0)

    def _gradient(self, y: np.ndarray) -> np.ndarray:
        grad = self.c.copy()
        if self.Q is not None:
            grad += self.Q @ y
        if self.sine is not None:
            grad += self.sine * np.cos(y)
        return grad

    def solve(self, g, h, G=None, H=None, warm_start=None) -> SolveResult:
        G = (sp.csr_matrix(G) if G is not None else self.G).toarray()
        H = (sp.csr_matrix(H) if H is not None else self.H).toarray()
        g, h = np.asarray(g, dtype=np.float64), np.asarray(h, dtype=np.float64)
        if warm_start is PREVIOUS:
            warm_start = self._last
        if warm_start is not None:
            y0 = np.asarray(warm_start, dtype=np.float64)
        else:
            y0 = np.linalg.pinv(G) @ g if G.shape[0] else np.zeros(len(self.c))
        constraints = []
        if G.shape[0]:
            constraints.append({"type": "eq", "fun": lambda y: G @ y - g, "jac": lambda y: G})
        if H.shape[0]:
            constraints.append({"type": "ineq", "fun": lambda y: h - H @ y, "jac": lambda y: -H})
        t0 = time.perf_counter()
        res = minimize(
            self.objective_value, y0, jac=self._gradient, method="SLSQP", constraints=constraints,
            options={"ftol": self.settings["ftol"], "maxiter": self.settings["maxiter"]},
        )
        elapsed = time.perf_counter() - t0
        y = np.asarray(res.x, dtype=np.float64)
        worst = max(np.abs(G @ y - g).max(initial=0.0), (H @ y - h).max(initial=0.0))
        if not res.success or worst > self.settings["feas_tol"]:
            status = f"slsqp: {res.message} (violation {worst:.1e})"
            return SolveResult(np.full(len(self.c), np.nan), np.nan, status, elapsed, int(res.nit))
        self._last = y
        return SolveResult(y, self.objective_value(y), "optimal", elapsed, int(res.nit))
