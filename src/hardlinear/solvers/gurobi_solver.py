"""Gurobi through gurobipy, where it is installed and its licence admits the model.

The bundled (pip) licence is size-limited: 2000 variables and 2000 constraints for an LP, and far less once
the objective has a quadratic term (error 10010 from ``optimize()``). Both cases raise
:class:`SolverUnavailable` with the reason, so a sweep can skip the run loudly.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from hardlinear.solvers.base import (
    COUNT,
    MAX_SOLVER_THREADS,
    PREVIOUS,
    SECONDS,
    TOLERANCE,
    Option,
    QPSolver,
    SolveResult,
    SolverUnavailable,
)


class GurobiSolver(QPSolver):
    name = "gurobi"
    supports_warm_start = True
    supports_previous_state = True  # the basis of the previous solve
    OPTIONS = {  # tuning only: never LogFile, ResultFile, OutputFlag (files and logs)
        "Threads": Option(int, 1, MAX_SOLVER_THREADS),
        "Method": Option(int, -1, 5),
        "TimeLimit": SECONDS,
        "IterationLimit": Option(float, 0.0, 1e15),
        "BarIterLimit": COUNT,
        "FeasibilityTol": TOLERANCE,
        "OptimalityTol": TOLERANCE,
        "BarConvTol": TOLERANCE,
        "Presolve": Option(int, -1, 2),
        "Crossover": Option(int, -1, 4),
        "NumericFocus": Option(int, 0, 3),
        "Seed": COUNT,
    }

    def __init__(self, Q, c, G, H, **options) -> None:
        super().__init__(Q, c, G, H, **options)
        try:
            import gurobipy as gp
        except ImportError as err:  # pragma: no cover - depends on the environment
            raise SolverUnavailable("gurobi: gurobipy is not installed (pip install 'hardlinear[gurobi]')") from err
        self._gp = gp
        self._build(self.G, self.H)

    def _build(self, G, H) -> None:
        gp = self._gp
        try:
            env = gp.Env(empty=True)
            env.setParam("OutputFlag", 0)
            env.setParam("Threads", int(self.options.get("Threads", 1)))
            env.start()
            model = gp.Model(env=env)
            for key, value in self.options.items():
                model.setParam(key, value)
            y = model.addMVar(G.shape[1], lb=-gp.GRB.INFINITY)
            self._eq = model.addMConstr(G, y, "=", np.zeros(G.shape[0]))
            self._ineq = model.addMConstr(H, y, "<", np.zeros(H.shape[0]))
            objective = self.c @ y
            if self.Q is not None:
                objective = objective + 0.5 * (y @ self.Q @ y)
            model.setObjective(objective)
        except gp.GurobiError as err:
            raise SolverUnavailable(f"gurobi: {err}") from err
        self._model, self._y = model, y

    def solve(self, g, h, G=None, H=None, warm_start=None) -> SolveResult:
        gp = self._gp
        if G is not None or H is not None:
            self._build(sp.csr_matrix(G if G is not None else self.G), sp.csr_matrix(H if H is not None else self.H))
        self._eq.RHS = g
        self._ineq.RHS = h
        if warm_start is PREVIOUS:
            warm_start = None  # Gurobi re-solves from the previous basis unless reset
        else:
            self._model.reset()  # no basis carried over from another instance
        if warm_start is not None:
            self._y.Start = np.asarray(warm_start, dtype=np.float64)
        t0 = time.perf_counter()
        try:
            self._model.optimize()
        except gp.GurobiError as err:
            raise SolverUnavailable(
                f"gurobi refused the model ({self._model.NumVars} variables, {self._model.NumConstrs} constraints): "
                f"{err}. The pip licence is size-limited; use a full licence or another solver."
            ) from err
        elapsed = time.perf_counter() - t0
        status = self._model.Status
        iters = int(self._model.IterCount + self._model.BarIterCount)
        if status != gp.GRB.OPTIMAL:
            return SolveResult(np.full(len(self.c), np.nan), np.nan, f"gurobi status {status}", elapsed, iters)
        y = np.asarray(self._y.X)
        return SolveResult(y, self.objective_value(y), "optimal", elapsed, iters)
