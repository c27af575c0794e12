"""Reference solvers behind one interface, and batched solves of a problem's instances."""

from __future__ import annotations

import importlib
import logging
import threading
import time
from dataclasses import dataclass

import numpy as np
import torch

from hardlinear.solvers.base import (
    PREVIOUS,
    Option,
    QPSolver,
    SolverError,
    SolveResult,
    SolverUnavailable,
    check_solver_options,
    solver_option_problems,
)

BACKENDS = {
    "highs": "hardlinear.solvers.highs:HighsSolver",
    "clarabel": "hardlinear.solvers.clarabel_solver:ClarabelSolver",
    "osqp": "hardlinear.solvers.osqp_solver:OSQPSolver",
    "gurobi": "hardlinear.solvers.gurobi_solver:GurobiSolver",
    "slsqp": "hardlinear.solvers.local_nlp:SLSQPSolver",
}

__all__ = [
    "BACKENDS", "EXECUTORS", "PREVIOUS", "Option", "QPSolver", "Solution", "SolveResult", "SolverError", "SolverUnavailable",
    "check_solver_options", "make_solver", "solve_batch", "solver_option_problems",
]


def solver_class(name: str) -> type[QPSolver]:
    if name not in BACKENDS:
        raise ValueError(f"unknown solver {name!r}; choose one of {sorted(BACKENDS)}")
    module, cls = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def make_solver(problem, name: str | None = None, **options) -> QPSolver:
    """A backend holding the problem's compact model (left-hand side at nominal input for the LHS family)."""
    name = name or problem.default_solver()
    G, _, H, _ = problem.compact.instance(np.zeros(problem.k))
    obj = problem.objective_data
    cls = solver_class(name)
    if getattr(obj, "is_nonconvex", False):
        if not getattr(cls, "supports_nonconvex", False):
            raise SolverUnavailable(f"{name} solves convex LPs/QPs; {problem.name} has a nonconvex objective: use solver=slsqp")
        options = {"sine": obj.sine, **options}
    return cls(obj.Q, obj.c, G, H, **options)


@dataclass
class Solution:
    """Solutions of a batch, in the problem's form; ``status`` per instance."""

    y: np.ndarray  # (B, n)
    objective: np.ndarray  # (B,)
    status: list[str]
    time_s: np.ndarray  # (B,) solver wall time per instance
    iterations: np.ndarray  # (B,)
    solver: str

    @property
    def all_optimal(self) -> bool:
        return all(s == "optimal" for s in self.status)


class FamilySolver:
    """Solves one instance ``xi`` of a problem through its compact family and a backend (:func:`make_solver`), the
    backend made on first use in each process (it does not pickle: a dask worker makes its own)."""

    def __init__(self, problem, name: str, options: dict, backend: QPSolver | None = None) -> None:
        self.problem, self.name, self.options, self._backend = problem, name, options, backend

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_backend": None}

    def solve(self, xi: np.ndarray, warm_start: np.ndarray | None = None) -> SolveResult:
        problem = self.problem
        if self._backend is None:
            self._backend = make_solver(problem, self.name, **self.options)
        lhs_varies = problem.compact.input_dependent_lhs
        G, g, H, h = problem.compact.instance(xi)
        ws = None if warm_start is None else warm_start[: problem.n_orig]
        return self._backend.solve(g, h, G=G if lhs_varies else None, H=H if lhs_varies else None, warm_start=ws)


class SolveJob:
    """A batch of instances and what solves each (``solver.solve(xi_row, warm_start_row)``): the unit that the
    process pool (by fork) and dask workers (pickled once each) receive; each block of rows is solved in order.

    One block at a time per copy (a lock): the solver holds one HiGHS, which two threads must not share. A dask
    worker keeps one copy of the job for all its threads, so a worker runs one solve at a time whatever its
    ``--nthreads``: give a worker one thread and run one worker per core (the ``LocalCluster`` made here does)."""

    def __init__(self, solver, xi: np.ndarray, warm_start: np.ndarray | None) -> None:
        self.solver, self.xi, self.warm_start = solver, xi, warm_start
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _lock=threading.Lock())

    def solve_rows(self, rows: np.ndarray, done=None) -> list[SolveResult]:  # noqa: ANN001
        out = []
        with self._lock:
            for i in rows:
                ws = None if self.warm_start is None else self.warm_start[i]
                out.append(self.solver.solve(self.xi[i]) if ws is None else self.solver.solve(self.xi[i], ws))
                if done is not None:
                    done(1)
        return out


# What a forked worker of solve_batch reads (inherited copy-on-write from the parent: the problem is never pickled).
_WORKER_JOB: dict = {}


def _solve_rows(rows: np.ndarray) -> list[SolveResult]:
    """A forked worker's block: the instances ``rows`` of the current job."""
    return _WORKER_JOB["job"].solve_rows(rows)


def _solve_job_rows(job: SolveJob, rows: np.ndarray) -> list[SolveResult]:
    """A dask task: the instances ``rows`` of ``job`` (sent to each worker once)."""
    return job.solve_rows(rows)


def _parallel_context(workers: int):
    """The ``fork`` start method (workers share the parent's problem without pickling it), or None where the
    platform has none (Windows): then solve_batch runs in one process, with a warning."""
    import multiprocessing as mp
    import warnings

    if workers > 1 and "fork" not in mp.get_all_start_methods():
        warnings.warn(f"data.workers={workers}: this platform cannot fork; solving in one process", stacklevel=3)
        return None
    return mp.get_context("fork") if workers > 1 else None


log = logging.getLogger(__name__)

EXECUTORS = ("process", "dask")
"""Where :func:`solve_batch` solves a batch: forked processes on this machine, or a dask.distributed cluster."""

SCHEDULER_TIMEOUT_S = 30.0
"""Seconds :func:`solve_batch` waits for a dask scheduler (``data.scheduler``) to answer before it gives up."""

PROGRESS_LOG_S = 60.0
"""Seconds between the progress lines of a batch of solves that has no bar (a log file, ``progress=false``)."""


class _SolveCounter:
    """``done(n)`` of a batch of solves: the bar's update, and without a bar a log line every ``PROGRESS_LOG_S``
    seconds (count, elapsed, time left at the rate so far), so a long build of a solved set shows it is moving."""

    def __init__(self, bar, label: str, total: int) -> None:
        self.bar, self.label, self.total = bar, label, total
        self.done = 0
        self.t0 = self.last = time.perf_counter()

    def __call__(self, n: int) -> None:
        self.bar.update(n)
        self.done += n
        now = time.perf_counter()
        if self.bar.disable and self.done < self.total and now - self.last >= PROGRESS_LOG_S:
            self.last, elapsed = now, now - self.t0
            log.info("%s: %d of %d solved (%.0f %%) in %.0f s, about %.0f s left", self.label, self.done, self.total,
                     100.0 * self.done / self.total, elapsed, elapsed / self.done * (self.total - self.done))


def solve_batch(
    problem,
    xi: torch.Tensor | np.ndarray,
    solver: str | None = None,
    progress: bool = False,
    warm_start: np.ndarray | None = None,
    allow_failures: bool = False,
    workers: int = 1,
    executor: str = "process",
    scheduler: str | None = None,
    lazy_rows: bool | None = None,
    **options,
) -> Solution:
    """Solve every instance of ``xi: (B, k)``; raises :class:`SolverError` on any non-optimal solve
    unless ``allow_failures`` (then the row is NaN and its status says why).

    ``lazy_rows``: solve with the rows added as they are violated where the problem offers it
    (``problem.resolve_lazy_rows``: None is the problem's default, lazy line rows for the economic dispatch on
    HiGHS); the same optimum as the whole LP.

    ``executor``: where the instances are solved, in contiguous blocks, each instance from scratch (no basis carried
    over unless ``warm_start`` gives one per instance), so the solutions are the same whatever the executor and the
    number of workers (tests/test_data.py checks this bit for bit):

    - ``process``: ``workers`` forked processes on this machine (one: this process);
    - ``dask``: a ``dask.distributed`` cluster, a ``LocalCluster`` of ``workers`` processes on this machine, or the
      cluster whose scheduler is at ``scheduler`` (``tcp://host:8786``; its workers need hardlinear installed)."""
    from tqdm.auto import tqdm

    if int(workers) < 1:
        raise ValueError(f"workers must be >= 1; got {workers}")
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}; got {executor!r}")
    if scheduler is not None and executor != "dask":
        raise ValueError(f"a scheduler address ({scheduler!r}) is for executor='dask' (data.executor=dask); got executor={executor!r}")
    xi_np = xi.detach().cpu().double().numpy() if isinstance(xi, torch.Tensor) else np.asarray(xi, dtype=np.float64)
    name = solver or problem.default_solver()
    if problem.resolve_lazy_rows(lazy_rows, name):
        if warm_start is not None:
            raise ValueError(f"{problem.name}: per-instance warm starts are for the whole LP; pass lazy_rows=False with warm_start")
        instance_solver = problem.lazy_reference(**options)
    else:
        # an unknown or missing solver fails here, in this process
        instance_solver = FamilySolver(problem, name, options, make_solver(problem, name, **options))
    job = SolveJob(instance_solver, xi_np, warm_start)
    # disable=None: no bar when the output is not a terminal (a log file of a sweep or a SLURM job)
    bar = tqdm(total=len(xi_np), desc=f"{problem.name}: {name}", disable=None if progress else True, leave=False)
    done = _SolveCounter(bar, f"{problem.name} reference solves ({name})", len(xi_np))
    try:
        if executor == "dask":
            results = _solve_on_dask(job, len(xi_np), int(workers), scheduler, done)
        else:
            results = _solve_in_processes(job, len(xi_np), int(workers), done)
    finally:
        bar.close()
    status = [r.status for r in results]
    bad = [i for i, s in enumerate(status) if s != "optimal"]
    if bad and not allow_failures:
        raise SolverError(
            f"{name} did not solve {len(bad)} of {len(status)} instances of {problem.name} to optimality "
            f"(first: instance {bad[0]}, status {status[bad[0]]!r}); {_failure_hint(problem, name, [status[i] for i in bad])}"
        )
    y_orig = np.stack([r.y for r in results]) if results else np.zeros((0, problem.n_orig))
    with torch.no_grad():
        y = problem.to_form(torch.as_tensor(xi_np), torch.as_tensor(y_orig)).numpy()
    return Solution(
        y=y,
        objective=np.array([r.objective for r in results]),
        status=status,
        time_s=np.array([r.time_s for r in results]),
        iterations=np.array([r.iterations for r in results]),
        solver=name,
    )


def _solve_in_processes(job: SolveJob, count: int, workers: int, done: _SolveCounter) -> list[SolveResult]:
    """The job here (one worker) or in a pool of forked processes that inherit it."""
    workers = min(workers, count)
    context = _parallel_context(workers)
    if context is None:
        return job.solve_rows(np.arange(count), done)
    from concurrent.futures import ProcessPoolExecutor

    results: list[SolveResult] = []
    # about four blocks per worker: progress moves, and a slow block does not idle the others long
    blocks = np.array_split(np.arange(count), 4 * workers)
    _WORKER_JOB["job"] = job
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            for rows, part in zip(blocks, pool.map(_solve_rows, blocks)):
                results += part
                done(len(rows))
    finally:
        _WORKER_JOB.clear()
    return results


def _solve_on_dask(job: SolveJob, count: int, workers: int, scheduler: str | None, done: _SolveCounter) -> list[SolveResult]:
    """The job on a dask.distributed cluster: sent once to every worker, then about four blocks of rows a worker
    thread, gathered in order."""
    from hardlinear.runtime.extras import require

    distributed = require("distributed", extra="harness", purpose="data.executor=dask")
    # dask's own INFO lines (each nanny, worker and comm: ~70 a cluster) would bury the run's log; warnings still show
    quiet = logging.getLogger("distributed")
    level = quiet.level
    quiet.setLevel(max(level, logging.WARNING))
    cluster = None
    try:
        if scheduler is None:
            cluster = distributed.LocalCluster(n_workers=min(workers, max(count, 1)), threads_per_worker=1, processes=True,
                                               dashboard_address=None)
            log.info("reference solves on a dask LocalCluster of %d processes (%s)", len(cluster.workers), cluster.scheduler_address)
        try:
            client = distributed.Client(cluster if cluster is not None else scheduler, timeout=SCHEDULER_TIMEOUT_S)
        except (OSError, TimeoutError) as err:
            raise ConnectionError(
                f"no dask scheduler answered at data.scheduler={scheduler!r} within {SCHEDULER_TIMEOUT_S:g} s ({err}); start the "
                "cluster first (docs/harness.md, 'Reference solves on a cluster') or fix the address"
            ) from err
        with client:
            slots = max(1, sum(client.nthreads().values()))
            blocks = [b for b in np.array_split(np.arange(count), 4 * slots) if len(b)]
            shared = client.scatter(job, broadcast=True)
            futures = [client.submit(_solve_job_rows, shared, rows, pure=False) for rows in blocks]
            where = {f.key: i for i, f in enumerate(futures)}
            parts: list[list[SolveResult] | None] = [None] * len(blocks)
            for future in distributed.as_completed(futures):
                i = where[future.key]
                parts[i] = future.result()
                done(len(blocks[i]))
    finally:
        if cluster is not None:
            cluster.close()
        quiet.setLevel(level)
    return [r for part in parts for r in part]


def _failure_hint(problem, solver: str, statuses: list[str]) -> str:
    """What to do about failed solves: infeasible instances point at the input box (the uncertainty level),
    anything else at another solver (never the one that just failed)."""
    level = getattr(problem, "uncertainty", None)
    if any("infeas" in str(s).lower() for s in statuses):
        where = f" at problem.uncertainty={level:g}" if level is not None else ""
        return f"these inputs have no feasible point{where}: the input box reaches instances with no solution; lower problem.uncertainty"
    others = [b for b in ("clarabel", "highs") if b != solver]
    return f"try data.solver={others[0]}" + (f", or lower problem.uncertainty (now {level:g})" if level is not None else "")
