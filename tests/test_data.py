"""Datasets: reference solutions, the hash-keyed checksummed cache, corruption handling."""

import logging

import numpy as np
import pytest
import torch

from hardlinear.problems import build_problem
from hardlinear.problems.datasets import build_dataset, dataset_key


def test_dataset_is_cached_and_reused(tmp_path):
    p = build_problem("dcopf_14")
    first = build_dataset(p, "test", 6, seed=0, cache_dir=tmp_path, progress=False)
    second = build_dataset(p, "test", 6, seed=0, cache_dir=tmp_path, progress=False)
    assert not first.from_cache and second.from_cache
    assert torch.equal(first.xi, second.xi) and torch.allclose(first.objective, second.objective)
    other = build_dataset(p, "val", 6, seed=0, cache_dir=tmp_path, progress=False)
    assert not torch.equal(other.xi, first.xi)
    # a different problem (uncertainty) never reads this cache
    q = build_problem("dcopf_14", uncertainty=0.2)
    assert not build_dataset(q, "test", 6, seed=0, cache_dir=tmp_path, progress=False).from_cache


def test_corrupt_cache_is_detected_and_rebuilt(tmp_path, caplog):
    p = build_problem("portfolio")
    build_dataset(p, "test", 5, seed=1, cache_dir=tmp_path, progress=False)
    (path,) = tmp_path.glob("*.npz")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # truncated
    with caplog.at_level(logging.WARNING):
        rebuilt = build_dataset(p, "test", 5, seed=1, cache_dir=tmp_path, progress=False)
    assert not rebuilt.from_cache and "rebuilding" in caplog.text
    assert build_dataset(p, "test", 5, seed=1, cache_dir=tmp_path, progress=False).from_cache


def test_edited_cache_fails_its_checksum(tmp_path, caplog):
    import numpy as np

    p = build_problem("portfolio")
    build_dataset(p, "test", 5, seed=2, cache_dir=tmp_path, progress=False)
    (path,) = tmp_path.glob("*.npz")
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["objective"] = arrays["objective"] + 1.0  # an edit that keeps the file readable
    np.savez(path, **arrays)
    with caplog.at_level(logging.WARNING):
        rebuilt = build_dataset(p, "test", 5, seed=2, cache_dir=tmp_path, progress=False)
    assert "checksum" in caplog.text and not rebuilt.from_cache


@pytest.mark.parametrize("objective", ["lp", "qp"])  # HiGHS and Clarabel
def test_reference_solves_are_the_same_whatever_the_worker_count(objective):
    """data.workers splits the solves over forked processes; every instance is solved from scratch, so the
    dataset is the same bit for bit (and so is its cache key: workers is not part of it)."""
    problem = build_problem("dcopf_14", objective=objective)
    one = build_dataset(problem, "val", 13, 0, cache_dir=None, progress=False)
    three = build_dataset(problem, "val", 13, 0, cache_dir=None, progress=False, workers=3)
    assert np.array_equal(one.xi.numpy(), three.xi.numpy())
    assert np.array_equal(one.y.numpy(), three.y.numpy())
    assert np.array_equal(one.objective.numpy(), three.objective.numpy())
    assert len(three.solve_time_s) == 13
    more = build_dataset(problem, "val", 2, 0, cache_dir=None, progress=False, workers=8)  # more workers than rows
    assert np.array_equal(more.y.numpy(), one.y.numpy()[:2])
    assert dataset_key(problem, "val", 13, 0, one.solver) == dataset_key(problem, "val", 13, 0, three.solver)
    with pytest.raises(ValueError, match="workers must be >= 1"):
        build_dataset(problem, "val", 2, 0, cache_dir=None, progress=False, workers=0)


def test_a_long_build_without_a_bar_logs_its_progress(monkeypatch, caplog):
    """With no bar (a log file, progress=false) a batch of solves logs its count and time left every
    PROGRESS_LOG_S seconds (here every solve); the last solve gives no line (the build's own line follows)."""
    import hardlinear.solvers as solvers

    monkeypatch.setattr(solvers, "PROGRESS_LOG_S", 0.0)
    with caplog.at_level(logging.INFO, logger="hardlinear.solvers"):
        build_dataset(build_problem("dcopf_14"), "val", 3, 0, cache_dir=None, progress=False)
    lines = [r.getMessage() for r in caplog.records if r.name == "hardlinear.solvers"]
    assert [line.split(" (")[:2] for line in lines] == [["dcopf_14 reference solves", "highs): 1 of 3 solved"],
                                                        ["dcopf_14 reference solves", "highs): 2 of 3 solved"]]
    assert all("s left" in line for line in lines)


def test_two_runs_wanting_one_set_solve_it_once(tmp_path, caplog):
    """The second waits on the set's lock while the first solves, then reads the cache (no duplicate solves)."""
    import threading
    import time

    problem = build_problem("dcopf_14")
    solve, calls = problem.solve, []

    def slow_solve(*args, **kwargs):
        calls.append(threading.current_thread().name)
        time.sleep(1.0)  # long enough for the other thread to reach the lock
        return solve(*args, **kwargs)

    problem.solve = slow_solve
    results = {}

    def build(name):
        results[name] = build_dataset(problem, "val", 6, 0, cache_dir=tmp_path, progress=False)

    threads = [threading.Thread(target=build, args=(name,), name=name) for name in ("first", "second")]
    with caplog.at_level(logging.INFO, logger="hardlinear.problems.datasets"):
        threads[0].start()
        time.sleep(0.3)
        threads[1].start()
        for t in threads:
            t.join()
    # whichever thread took the lock solved; the other waited and read the cache
    assert len(calls) == 1 and sorted(r.from_cache for r in results.values()) == [False, True]
    assert torch.equal(results["first"].y, results["second"].y)
    assert "another run is building it" in caplog.text
