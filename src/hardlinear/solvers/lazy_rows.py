"""Linear programs whose rows come lazily (constraint generation), on HiGHS with its basis kept between rounds.

Why: an LP with many rows of which few bind (a dispatch's line rows: thousands of lines, a handful congested) is
solved far faster without them: solve the LP with its base rows, ask an oracle which of the left-out rows the
solution violates, add at most a few (``highspy``'s ``addRows`` keeps the basis: the new rows' slacks enter it and
the dual simplex resumes from the previous optimum), and solve again, until no row is violated. The last solution
is then optimal for the whole LP: it is optimal for a relaxation and feasible for all rows (up to the oracle's
tolerance). PGLearn solves its economic dispatch this way (``AI4OPT/PGLearn.jl``, ``src/opf/ed.jl``: at most 8
lines a round, 128 rounds); written here from that description.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from hardlinear.solvers.base import SolveResult, check_solver_options
from hardlinear.solvers.highs import HighsSolver, quiet_highs, rerun_by_ipm

MAX_ROUNDS = 128
"""Solves of one instance at most (PGLearn's ``MAX_PTDF_ITERATIONS``); past it the instance reports a failure."""
PER_ROUND = 8
"""Groups of rows (a line's two rows) added a round at most (PGLearn's ``MAX_PTDF_PER_ITERATION``)."""
ROUND_LIMIT_STATUS = "lazy rows: round limit"


@dataclass
class LazyLP:
    """``min c x`` subject to ``col_lower <= x <= col_upper`` and ``row_lower <= A x <= row_upper`` (the base rows,
    always present); the lazy rows come from the oracle."""

    c: np.ndarray
    col_lower: np.ndarray
    col_upper: np.ndarray
    A: sp.csc_matrix  # any sparse format; CSC is passed without a copy
    row_lower: np.ndarray
    row_upper: np.ndarray


Separator = Callable[[np.ndarray, int], "tuple[sp.csr_matrix, np.ndarray, np.ndarray] | None"]
"""``separate(x, limit)``: the rows (``A``, lower, upper) of at most ``limit`` violated groups at ``x``, or None
when ``x`` violates none (the oracle keeps track of what it has added)."""


@dataclass
class LazyResult(SolveResult):
    """A solve's result with how many rounds it took and how many rows it added."""

    rounds: int = 0
    rows_added: int = 0


def lazy_highs(**options):  # noqa: ANN201 - a highspy.Highs
    """A quiet one-thread HiGHS with ``options`` (as :class:`~hardlinear.solvers.highs.HighsSolver` takes them,
    checked), for :func:`solve_lazy` to reuse across instances."""
    check_solver_options("highs", options, HighsSolver.OPTIONS)
    h = quiet_highs()
    h.setOptionValue("threads", 1)
    for key, value in options.items():
        h.setOptionValue(key, value)
    return h


def solve_lazy(lp: LazyLP, separate: Separator, max_rounds: int = MAX_ROUNDS, per_round: int = PER_ROUND,
               highs=None, **options) -> LazyResult:  # noqa: ANN001
    """Solve ``lp`` with the oracle's rows added as needed (module docstring). ``options``: HiGHS options, as
    :class:`~hardlinear.solvers.highs.HighsSolver` takes them; ``highs``: a :func:`lazy_highs` made with them, to
    reuse (the model and its basis are replaced here, so an earlier instance leaves nothing behind). ``time_s``
    covers everything this call does (the model, every round's solve and the oracle's work); ``iterations`` sums
    the rounds' simplex iterations."""
    import highspy as hs

    if max_rounds < 1 or per_round < 1:
        raise ValueError(f"max_rounds and per_round must be >= 1; got {max_rounds}, {per_round}")
    t0 = time.perf_counter()
    h = highs if highs is not None else lazy_highs(**options)
    A = lp.A if isinstance(lp.A, sp.csc_matrix) else sp.csc_matrix(lp.A)
    model = hs.HighsLp()
    model.num_col_, model.num_row_ = A.shape[1], A.shape[0]
    model.col_cost_, model.col_lower_, model.col_upper_ = lp.c, _f64(lp.col_lower), _f64(lp.col_upper)
    model.row_lower_, model.row_upper_ = _f64(lp.row_lower), _f64(lp.row_upper)
    model.a_matrix_.format_ = hs.MatrixFormat.kColwise
    model.a_matrix_.start_, model.a_matrix_.index_, model.a_matrix_.value_ = A.indptr, A.indices, A.data
    h.passModel(model)
    h.clearSolver()  # no basis from an earlier instance on a reused HiGHS
    iterations = rows_added = 0
    n = A.shape[1]
    for rounds in range(1, max_rounds + 1):
        status = h.run()
        if status == hs.HighsStatus.kError and "solver" not in options:
            status = rerun_by_ipm(h, options)
        info = h.getInfo()
        iterations += int(info.simplex_iteration_count + info.ipm_iteration_count)
        model_status = h.getModelStatus()
        if model_status != hs.HighsModelStatus.kOptimal:
            return LazyResult(np.full(n, np.nan), np.nan, h.modelStatusToString(model_status), time.perf_counter() - t0,
                              iterations, rounds, rows_added)
        x = np.asarray(h.getSolution().col_value)
        new = separate(x, per_round)
        if new is None:
            return LazyResult(x, float(lp.c @ x), "optimal", time.perf_counter() - t0, iterations, rounds, rows_added)
        rows, lower, upper = new[0] if isinstance(new[0], sp.csr_matrix) else sp.csr_matrix(new[0]), _f64(new[1]), _f64(new[2])
        h.addRows(rows.shape[0], lower, upper, rows.nnz, rows.indptr[:-1].astype(np.int32), rows.indices.astype(np.int32), rows.data)
        rows_added += rows.shape[0]
    return LazyResult(np.full(n, np.nan), np.nan, ROUND_LIMIT_STATUS, time.perf_counter() - t0, iterations, max_rounds, rows_added)


def _f64(values: np.ndarray) -> np.ndarray:
    """Bounds as HiGHS takes them (float64; its infinity, ``kHighsInf``, is numpy's)."""
    return np.ascontiguousarray(values, dtype=np.float64)
