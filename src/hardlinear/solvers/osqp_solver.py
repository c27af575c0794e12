"""OSQP (ADMM): fast and warm-startable, but first order: it may stop short of 1e-6 accuracy on LPs."""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from hardlinear.solvers.base import COUNT, PREVIOUS, SECONDS, TOLERANCE, Option, QPSolver, SolveResult

DEFAULTS = {"eps_abs": 1e-6, "eps_rel": 1e-6, "max_iter": 100_000, "polishing": True, "verbose": False}


class OSQPSolver(QPSolver):
    name = "osqp"
    supports_warm_start = True
    supports_previous_state = True  # the previous solve's primal and dual iterates
    OPTIONS = {
        "eps_abs": TOLERANCE, "eps_rel": TOLERANCE, "eps_prim_inf": TOLERANCE, "eps_dual_inf": TOLERANCE,
        "max_iter": COUNT, "polishing": Option(bool), "polish_refine_iter": COUNT, "verbose": Option(bool),
        "rho": Option(float, 0.0, 1e12), "sigma": Option(float, 0.0, 1e12), "alpha": Option(float, 0.0, 2.0),
        "adaptive_rho": Option(bool), "scaling": COUNT, "check_termination": COUNT, "time_limit": SECONDS,
        "warm_starting": Option(bool),
    }

    def __init__(self, Q, c, G, H, **options) -> None:
        super().__init__(Q, c, G, H, **options)
        self._settings = {**DEFAULTS, **options}
        self._setup(self.G, self.H)

    def _setup(self, G, H) -> None:
        import osqp

        n = G.shape[1]
        P = sp.triu(self.Q if self.Q is not None else sp.csc_matrix((n, n)), format="csc")
        A = sp.vstack([G, H], format="csc")
        self._m_eq, self._m_ineq = G.shape[0], H.shape[0]
        self._prob = osqp.OSQP()
        m = A.shape[0]
        self._prob.setup(P, self.c, A, np.full(m, -np.inf), np.full(m, np.inf), **self._settings)

    def solve(self, g, h, G=None, H=None, warm_start=None) -> SolveResult:
        if G is not None or H is not None:
            self._setup(sp.csr_matrix(G if G is not None else self.G), sp.csr_matrix(H if H is not None else self.H))
        lower = np.concatenate([g, np.full(len(h), -np.inf)])
        upper = np.concatenate([g, h])
        self._prob.update(l=lower, u=upper)
        if warm_start is PREVIOUS:
            pass  # OSQP starts from its last iterates
        elif warm_start is not None:
            self._prob.warm_start(x=np.asarray(warm_start, dtype=np.float64))
        else:
            self._prob.warm_start(x=np.zeros(len(self.c)), y=np.zeros(len(lower)))
        t0 = time.perf_counter()
        res = self._prob.solve(raise_error=False)
        elapsed = time.perf_counter() - t0
        status = str(res.info.status).lower()
        iters = int(res.info.iter)
        if status not in ("solved",):
            return SolveResult(np.full(len(self.c), np.nan), np.nan, status, elapsed, iters)
        y = np.asarray(res.x)
        return SolveResult(y, self.objective_value(y), "optimal", elapsed, iters)
