"""Clarabel's interior point method: exact for LPs and QPs, no warm start."""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from hardlinear.solvers.base import COUNT, SECONDS, TOLERANCE, Option, QPSolver, SolveResult

# Clarabel's own default is 200 iterations; a projection QP near a degenerate vertex of the portfolio's C(x)
# once needed more (one of 100 "maxiterations" in a paper run). 1000 is still bounded, and a failure stays loud.
DEFAULTS = {"max_iter": 1000}


class ClarabelSolver(QPSolver):
    name = "clarabel"
    OPTIONS = {
        "max_iter": COUNT, "time_limit": SECONDS, "tol_gap_abs": TOLERANCE, "tol_gap_rel": TOLERANCE,
        "tol_feas": TOLERANCE, "tol_ktratio": TOLERANCE, "tol_infeas_abs": TOLERANCE, "tol_infeas_rel": TOLERANCE,
        "equilibrate_enable": Option(bool), "presolve_enable": Option(bool), "verbose": Option(bool),
    }

    def __init__(self, Q, c, G, H, **options) -> None:
        super().__init__(Q, c, G, H, **options)
        import clarabel

        self._cl = clarabel
        self._settings = clarabel.DefaultSettings()
        self._settings.verbose = False
        for key, value in {**DEFAULTS, **options}.items():
            setattr(self._settings, key, value)
        n = self.G.shape[1]
        self._P = sp.triu(self.Q if self.Q is not None else sp.csc_matrix((n, n)), format="csc")
        self._cones = [clarabel.ZeroConeT(self.G.shape[0]), clarabel.NonnegativeConeT(self.H.shape[0])]

    def solve(self, g, h, G=None, H=None, warm_start=None) -> SolveResult:
        G = self.G if G is None else sp.csr_matrix(G)
        H = self.H if H is None else sp.csr_matrix(H)
        A = sp.vstack([G, H], format="csc")
        b = np.concatenate([g, h])
        t0 = time.perf_counter()
        solver = self._cl.DefaultSolver(self._P, self.c, A, b, self._cones, self._settings)
        sol = solver.solve()
        elapsed = time.perf_counter() - t0
        status = str(sol.status)
        y = np.asarray(sol.x)
        if status != "Solved":
            return SolveResult(np.full(G.shape[1], np.nan), np.nan, status.lower(), elapsed, int(sol.iterations))
        return SolveResult(y, self.objective_value(y), "optimal", elapsed, int(sol.iterations))
