"""HiGHS through highspy: the exact LP solver (simplex by default; also its QP solver)."""

from __future__ import annotations

import logging
import os
import sys
import time

import numpy as np
import scipy.sparse as sp

from hardlinear.solvers.base import COUNT, PREVIOUS, SECONDS, TOLERANCE, Option, QPSolver, SolveResult

_BANNER_SILENCED = False
log = logging.getLogger(__name__)


def quiet_highs():
    """A ``highspy.Highs`` with ``output_flag`` off. Why: HiGHS prints its copyright banner to the C-level
    stdout when the first instance of a process is built, before any option can be set, so every data build
    and every sweep job would print it; the first construction runs with file descriptor 1 pointed at
    /dev/null (later ones print nothing anyway)."""
    global _BANNER_SILENCED
    import highspy

    if _BANNER_SILENCED:
        h = highspy.Highs()
    else:
        sys.stdout.flush()
        saved, null = os.dup(1), os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        try:
            h = highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(null)
        _BANNER_SILENCED = True
    h.setOptionValue("output_flag", False)
    return h


class HighsSolver(QPSolver):
    name = "highs"
    supports_warm_start = True
    supports_previous_state = True  # the basis of the previous solve (a hot start of the dual simplex)
    OPTIONS = {  # tuning only: never output_flag, log_file, solution_file, write_*, read_* (they touch files)
        "time_limit": SECONDS,
        "primal_feasibility_tolerance": TOLERANCE,
        "dual_feasibility_tolerance": TOLERANCE,
        "ipm_optimality_tolerance": TOLERANCE,
        "simplex_iteration_limit": COUNT,
        "ipm_iteration_limit": COUNT,
        "qp_iteration_limit": COUNT,
        "random_seed": COUNT,
        "simplex_strategy": Option(int, 0, 4),
        "solver": Option(str, choices=("choose", "simplex", "ipm", "pdlp")),
        "presolve": Option(str, choices=("choose", "on", "off")),
        "run_crossover": Option(str, choices=("choose", "on", "off")),
    }

    def __init__(self, Q, c, G, H, **options) -> None:
        super().__init__(Q, c, G, H, **options)
        import highspy

        self._hs = highspy
        self._build(self.G, self.H)

    def _build(self, G: sp.csr_matrix, H: sp.csr_matrix) -> None:
        hs = self._hs
        h = quiet_highs()
        h.setOptionValue("threads", 1)
        for key, value in self.options.items():
            h.setOptionValue(key, value)
        A = sp.vstack([G, H], format="csc")
        n, m = A.shape[1], A.shape[0]
        lp = hs.HighsLp()
        lp.num_col_, lp.num_row_ = n, m
        lp.col_cost_ = self.c
        lp.col_lower_ = np.full(n, -hs.kHighsInf)
        lp.col_upper_ = np.full(n, hs.kHighsInf)
        lp.row_lower_ = np.full(m, -hs.kHighsInf)
        lp.row_upper_ = np.full(m, hs.kHighsInf)
        lp.a_matrix_.format_ = hs.MatrixFormat.kColwise
        lp.a_matrix_.start_ = A.indptr
        lp.a_matrix_.index_ = A.indices
        lp.a_matrix_.value_ = A.data
        h.passModel(lp)
        if self.Q is not None:
            Ql = sp.tril(self.Q, format="csc")  # HiGHS takes the lower triangle, column-wise
            h.passHessian(n, Ql.nnz, hs.HessianFormat.kTriangular, Ql.indptr, Ql.indices, Ql.data)
        self._h, self._m_eq, self._m = h, G.shape[0], m
        self._rows = np.arange(m, dtype=np.int32)

    def solve(self, g, h, G=None, H=None, warm_start=None) -> SolveResult:
        hs = self._hs
        if G is not None or H is not None:
            self._build(sp.csr_matrix(G if G is not None else self.G), sp.csr_matrix(H if H is not None else self.H))
        lower = np.concatenate([g, np.full(len(h), -hs.kHighsInf)])
        upper = np.concatenate([g, h])
        hh = self._h
        hh.changeRowsBounds(self._m, self._rows, lower, upper)
        if warm_start is PREVIOUS:
            pass  # HiGHS keeps the previous basis unless told otherwise
        elif warm_start is not None:
            sol = hs.HighsSolution()
            sol.col_value = np.asarray(warm_start, dtype=np.float64)
            sol.value_valid = True
            hh.setSolution(sol)
        else:
            hh.clearSolver()  # no basis carried over from another instance
        t0 = time.perf_counter()
        run_status = hh.run()
        if run_status == hs.HighsStatus.kError and self.Q is None and "solver" not in self.options:
            run_status = rerun_by_ipm(hh, self.options)
        elapsed = time.perf_counter() - t0
        status = hh.getModelStatus()
        info = hh.getInfo()
        if status != hs.HighsModelStatus.kOptimal:
            return SolveResult(np.full(self.G.shape[1], np.nan), np.nan, hh.modelStatusToString(status), elapsed, 0)
        y = np.asarray(hh.getSolution().col_value)
        iters = int(info.simplex_iteration_count + info.ipm_iteration_count + info.qp_iteration_count)
        return SolveResult(y, self.objective_value(y), "optimal", elapsed, iters)


def rerun_by_ipm(hh, options: dict):  # noqa: ANN001, ANN201 - highspy's objects
    """The instance again by the interior point and crossover (a basic optimal solution, as the simplex gives),
    after the simplex stopped on an error; returns the run status. Why: on PGLearn's dispatch at case9241 the dual
    simplex stops on 3 of 100 instances ("ratio test failed due to excessive dual values": thermal slack at 150,000
    $/p.u. beside generator costs of a few $), with no model status; the IPM with crossover solves them (instance 26
    of the validation set: the same objective as the primal simplex, 3866400.0207)."""
    log.info("highs: the simplex stopped on an error; solving the instance again by IPM with crossover")
    hh.clearSolver()
    hh.setOptionValue("solver", "ipm")
    hh.setOptionValue("run_crossover", "on")
    try:
        return hh.run()
    finally:
        hh.setOptionValue("solver", "choose")
        hh.setOptionValue("run_crossover", options.get("run_crossover", "on"))
