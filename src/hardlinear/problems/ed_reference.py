"""Reference solves of the economic dispatch with lazy line rows, as PGLearn makes its data.

The dispatch LP (:mod:`hardlinear.problems.ed`) has two rows per limited line, each dense in the generators (a PTDF
row); at case9241 that is 32,000 rows of 1,445 entries, and one solve takes 30-40 s. Few lines bind. So the LP is
solved with the power balance and the variables' bounds alone (``pmin <= pg <= pmax``, ``df >= 0``), the flows of its
dispatch are computed through the sparse factor of the bus susceptance matrix
(:class:`~hardlinear.problems.sparse_ptdf.SparsePTDF`, no dense PTDF), the most violated lines not yet in the LP (at
most ``per_round``) get their two rows ``+-PTDF_l Ag pg - df_l <= smax_l +- PTDF_l pd`` (each PTDF row one sparse
solve), and HiGHS solves again from its previous basis (:func:`~hardlinear.solvers.lazy_rows.solve_lazy`). When no
line outside the LP is over its limit by more than ``tol``, the dispatch is optimal for the full LP.

Returned: ``pg`` from the last solve; ``df`` from it on the lines in the LP, and ``max(|pf| - smax, 0)`` (at most
``tol``, mostly 0) on the others, so that the point is feasible for every line row. Its objective is the full LP's
optimum up to ``thermal_penalty * tol`` per line left out (``1.5e-4`` $ at the defaults) and HiGHS's tolerances:
tests hold it to the full LP's to 1e-7 relative. Each instance starts from the same empty set of line rows, so its
solution does not depend on which process solves it or in which order.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from hardlinear.problems.dcopf import branch_susceptance
from hardlinear.problems.sparse_ptdf import SparsePTDF
from hardlinear.solvers.lazy_rows import MAX_ROUNDS, PER_ROUND, LazyLP, LazyResult, lazy_highs, solve_lazy

LINE_TOL = 1e-9
"""p.u. (1e-7 MW at 100 MVA): a line outside the LP whose flow is over its limit by more than this is added."""


class LazyDispatchSolver:
    """Solves instances ``xi`` of an :class:`~hardlinear.problems.ed.EconomicDispatch` by lazy line rows (module
    docstring). Holds the network's arrays and the sparse factor, not the dense PTDF, so it pickles small (a
    dask worker receives it whole) and rebuilds its factor on first use."""

    name = "highs"

    def __init__(self, problem, max_rounds: int = MAX_ROUNDS, per_round: int = PER_ROUND, tol: float = LINE_TOL,
                 **options) -> None:
        net = problem.network
        self.limited = np.asarray(problem.limited)
        self.ptdf = SparsePTDF(net.f_bus, net.t_bus, branch_susceptance(net, "paper"), len(net.bus_ids), net.ref, self.limited)
        self.nb, self.gen_bus, self.load_bus = len(net.bus_ids), np.asarray(net.gen_bus), np.asarray(problem.load_bus)
        self.pd0 = net.pd[self.load_bus]
        self.centre, self.half_width = problem.centre, problem.half_width
        self.smax = net.rate_a[self.limited]
        self.pmin, self.pmax = net.pmin, net.pmax
        self.c = np.asarray(problem.objective_data.c, dtype=np.float64)
        self.max_rounds, self.per_round, self.tol, self.options = int(max_rounds), int(per_round), float(tol), options
        if not self.tol >= 0:
            raise ValueError(f"tol must be >= 0 (p.u. over a line's limit); got {tol}")
        ng, ne = len(self.gen_bus), len(self.limited)
        self.balance = sp.csc_matrix((np.ones(ng), (np.zeros(ng, dtype=int), np.arange(ng))), shape=(1, ng + ne))
        self._highs = lazy_highs(**options)  # checks the options here, in the caller's process

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_highs": None}  # a HiGHS does not pickle: a worker makes its own

    def nodal(self, values: np.ndarray, buses: np.ndarray) -> np.ndarray:
        """``(nb,)`` injections: ``values`` summed onto ``buses``."""
        return np.bincount(buses, weights=values, minlength=self.nb)

    def solve(self, xi: np.ndarray) -> LazyResult:
        """One instance ``xi: (k,)`` -> its optimal ``[pg | df]`` (the problem's compact variables); ``time_s`` is
        this call's wall time (load flows, every round's solve and its flows and rows); ``rounds`` and ``rows_added``
        say how many solves and line rows it took."""
        import time

        t0 = time.perf_counter()
        ng, ne = len(self.gen_bus), len(self.limited)
        pd = self.pd0 * (self.centre + self.half_width * np.asarray(xi, dtype=np.float64))
        load_flow = self.ptdf.flows(self.nodal(pd, self.load_bus))
        lp = LazyLP(
            c=self.c,
            col_lower=np.r_[self.pmin, np.zeros(ne)],
            col_upper=np.r_[self.pmax, np.full(ne, np.inf)],
            A=self.balance,
            row_lower=np.array([pd.sum()]),
            row_upper=np.array([pd.sum()]),
        )
        in_lp = np.zeros(ne, dtype=bool)

        def over(pg: np.ndarray) -> np.ndarray:
            return np.abs(self.ptdf.flows(self.nodal(pg, self.gen_bus)) - load_flow) - self.smax

        def separate(x: np.ndarray, limit: int):
            excess = over(x[:ng])
            excess[in_lp] = -np.inf
            violated = np.flatnonzero(excess > self.tol)
            if not len(violated):
                return None
            pick = violated[np.argsort(-excess[violated], kind="stable")[:limit]]
            in_lp[pick] = True
            coef = self.ptdf.rows(pick)[:, self.gen_bus]  # (q, ng): flow per unit of each generator
            rows = line_rows(np.r_[coef, -coef], np.r_[pick, pick], ng, ne)
            upper = np.r_[self.smax[pick] + load_flow[pick], self.smax[pick] - load_flow[pick]]
            return rows, np.full(2 * len(pick), -np.inf), upper

        if self._highs is None:
            self._highs = lazy_highs(**self.options)
        res = solve_lazy(lp, separate, self.max_rounds, self.per_round, self._highs, **self.options)
        y = res.y.copy()
        if res.status == "optimal":
            left_out = ~in_lp
            y[ng:][left_out] = np.maximum(over(y[:ng])[left_out], 0.0)
        objective = float(self.c @ y) if res.status == "optimal" else np.nan
        return LazyResult(y, objective, res.status, time.perf_counter() - t0, res.iterations, res.rounds, res.rows_added)


def line_rows(coef: np.ndarray, line: np.ndarray, ng: int, ne: int) -> sp.csr_matrix:
    """``(R, ng + ne)`` rows ``coef_r pg - df_line_r`` (zero coefficients dropped), built from their arrays
    (scipy's stacking costs more than the solve on small cases)."""
    nz = coef != 0
    counts = nz.sum(axis=1) + 1
    indptr = np.r_[0, np.cumsum(counts)]
    cols, vals = np.nonzero(nz)[1], coef[nz]
    indices, data = np.empty(indptr[-1], dtype=np.int32), np.empty(indptr[-1])
    fill = np.ones(indptr[-1], dtype=bool)
    fill[indptr[1:] - 1] = False  # each row's last entry is its line's slack
    indices[fill], data[fill] = cols, vals
    indices[~fill], data[~fill] = ng + line, -1.0
    return sp.csr_matrix((data, indices, indptr), shape=(len(coef), ng + ne))
