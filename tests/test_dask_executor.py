"""data.executor=dask: the reference solves on a real dask.distributed cluster give the process pool's solutions,
bit for bit (each instance is solved from scratch wherever it runs)."""

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from hardlinear.problems import build_problem  # noqa: E402
from hardlinear.problems.datasets import build_dataset  # noqa: E402
from hardlinear.solvers import solve_batch  # noqa: E402


@pytest.mark.slow
def test_the_default_local_cluster_of_two_processes_gives_the_process_pools_solutions():
    """data.executor=dask with no scheduler: a LocalCluster of data.workers=2 processes is started (its workers
    import hardlinear: ~10 s), the dispatch's lazy solver shipped to them without the dense PTDF."""
    dispatch = build_problem("ed", case="pglib_opf_case118_ieee")
    pool = build_dataset(dispatch, "val", 6, 0, cache_dir=None, progress=False, workers=2)
    cluster = build_dataset(dispatch, "val", 6, 0, cache_dir=None, progress=False, workers=2, executor="dask")
    assert pool.lazy_rows and cluster.lazy_rows
    assert np.array_equal(pool.y.numpy(), cluster.y.numpy())
    assert np.array_equal(pool.objective.numpy(), cluster.objective.numpy())
    assert len(cluster.solve_time_s) == 6 and np.all(cluster.solve_time_s > 0)


def test_a_running_cluster_by_its_scheduler_address_gives_the_same_solutions():
    """data.scheduler=<address>: a LocalCluster of two one-thread workers (in this process, to start fast) sharing
    one copy of the job: the dispatch by lazy line rows and a DC-OPF's whole LP against one process."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        address = cluster.scheduler_address
        dispatch = build_problem("ed", case="pglib_opf_case118_ieee")
        xi = dispatch.sample(7)
        here, there = solve_batch(dispatch, xi), solve_batch(dispatch, xi, executor="dask", scheduler=address)
        assert np.array_equal(here.y, there.y) and np.array_equal(here.objective, there.objective)
        opf = build_problem("dcopf_14")
        xi = opf.sample(5)
        here, there = solve_batch(opf, xi), solve_batch(opf, xi, executor="dask", scheduler=address)
        assert np.array_equal(here.y, there.y) and np.array_equal(here.objective, there.objective)


def test_executor_options_are_checked_before_any_solve():
    opf = build_problem("dcopf_14")
    with pytest.raises(ValueError, match="executor must be one of"):
        solve_batch(opf, opf.sample(1), executor="spark")
    with pytest.raises(ValueError, match="is for executor='dask'"):
        solve_batch(opf, opf.sample(1), scheduler="tcp://127.0.0.1:8786")


def test_a_scheduler_that_does_not_answer_names_the_fix(monkeypatch):
    import socket

    import hardlinear.solvers as solvers

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(solvers, "SCHEDULER_TIMEOUT_S", 1.0)
    opf = build_problem("dcopf_14")
    with pytest.raises(ConnectionError, match="no dask scheduler answered at data.scheduler='tcp://127.0.0.1:.*start the cluster"):
        solve_batch(opf, opf.sample(2), executor="dask", scheduler=f"tcp://127.0.0.1:{port}")
