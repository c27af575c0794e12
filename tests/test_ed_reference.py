"""The dispatch's reference solves with lazy line rows (hardlinear.problems.ed_reference): the sparse PTDF agrees
with the dense one, and the lazy solves reach the whole LP's optimum, on instances where lines bind."""

import dataclasses

import numpy as np
import pytest
import torch

import hardlinear.problems.ed as ed_module
from hardlinear.problems.datasets import build_dataset, dataset_key
from hardlinear.problems.dcopf import branch_susceptance
from hardlinear.problems.ed import EconomicDispatch
from hardlinear.problems.sparse_ptdf import SparsePTDF
from hardlinear.solvers import SolverError
from hardlinear.solvers.lazy_rows import ROUND_LIMIT_STATUS

REL = 1e-7  # the lazy optimum against the whole LP's, relative (issue 57)


def _cut_ratings(monkeypatch, case: str, factor: float) -> EconomicDispatch:
    """The dispatch of ``case`` with every line rating times ``factor`` (the case's own data, rated lower)."""
    net = ed_module.load_network(case)
    monkeypatch.setattr(ed_module, "load_network", lambda name: dataclasses.replace(net, rate_a=net.rate_a * factor))
    return EconomicDispatch(case)


def _binding_lines(problem: EconomicDispatch, xi: torch.Tensor, y: np.ndarray) -> np.ndarray:
    """Per instance, how many limited lines carry their rating (or more) in ``y``, by the dense PTDF."""
    net, ng = problem.network, len(problem.network.gen_bus)
    inj = np.zeros((len(xi), len(net.bus_ids)))
    for i in range(len(xi)):
        np.add.at(inj[i], net.gen_bus, y[i, :ng])
    inj[:, problem.load_bus] -= problem.loads(xi).numpy()
    flows = inj @ problem.ptdf[problem.limited].T
    return (np.abs(flows) >= net.rate_a[problem.limited] - 1e-6).sum(axis=1)


@pytest.mark.parametrize("case", ["pglib_opf_case14_ieee", "pglib_opf_case118_ieee", "pglib_opf_case300_ieee"])
def test_sparse_ptdf_rows_and_flows_equal_the_dense_ptdf(case):
    problem = EconomicDispatch(case)
    net, dense = problem.network, problem.ptdf
    sparse = SparsePTDF(net.f_bus, net.t_bus, branch_susceptance(net, "paper"), len(net.bus_ids), net.ref, problem.limited)
    rows = sparse.rows(np.arange(len(problem.limited)))
    scale = np.abs(dense).max()
    assert np.abs(rows - dense[problem.limited]).max() <= 1e-12 * scale
    p = np.random.default_rng(0).normal(size=(len(net.bus_ids), 3))
    flows = sparse.flows(p)
    assert np.abs(flows - dense[problem.limited] @ p).max() <= 1e-12 * np.abs(dense[problem.limited] @ p).max()
    assert np.allclose(sparse.flows(p[:, 0]), flows[:, 0], rtol=0, atol=1e-15 * np.abs(flows).max())


CASES = [
    ("pglib_opf_case14_ieee", "ratings x 0.4"),
    ("pglib_opf_case30_ieee", {"load_low": 1.0, "load_high": 1.1}),
    ("pglib_opf_case118_ieee", {}),
    ("pglib_opf_case118_ieee", {"thermal_penalty": 1.0}),  # a cheap slack: lines overloaded at the optimum
    ("pglib_opf_case300_ieee", {}),
]


@pytest.mark.parametrize(("case", "change"), CASES, ids=[f"{c}-{k}" for c, k in CASES])
def test_lazy_line_rows_reach_the_whole_lps_optimum_where_lines_bind(case, change, monkeypatch):
    problem = _cut_ratings(monkeypatch, case, 0.4) if isinstance(change, str) else EconomicDispatch(case, **change)
    xi = problem.sample(4, torch.Generator().manual_seed(3))
    full = problem.solve(xi, lazy_rows=False)
    lazy = problem.solve(xi)
    assert problem.resolve_lazy_rows(None, "highs")  # lazy is the dispatch's default on HiGHS
    binding = _binding_lines(problem, xi, full.y)
    assert binding.max() >= 1, "no line binds: the instances do not test the line rows"
    assert np.all(np.abs(lazy.objective - full.objective) <= REL * np.abs(full.objective))
    # the lazy point is feasible for every row of the whole LP (HiGHS's tolerances), and its objective is its own
    y = torch.as_tensor(lazy.y)
    assert problem.eq_resid(xi, y).abs().max() <= 1e-8 and problem.ineq_resid(xi, y).max() <= 1e-7
    assert torch.allclose(problem.objective(xi, y), torch.as_tensor(lazy.objective), rtol=1e-12)
    # rows were added where lines bind, and not all of them
    solver = problem.lazy_reference()
    results = [solver.solve(x.numpy()) for x in xi]
    assert all(r.status == "optimal" for r in results)
    assert sum(r.rows_added for r in results) >= 2 and max(r.rows_added for r in results) < 2 * len(problem.limited)
    assert np.all(lazy.time_s > 0)


@pytest.mark.slow
def test_lazy_line_rows_at_a_mid_sized_case():
    problem = EconomicDispatch("pglib_opf_case1354_pegase")
    xi = problem.sample(3, torch.Generator().manual_seed(4))
    full, lazy = problem.solve(xi, lazy_rows=False), problem.solve(xi)
    assert _binding_lines(problem, xi, full.y).min() >= 1
    assert np.all(np.abs(lazy.objective - full.objective) <= REL * np.abs(full.objective))


def test_the_round_limit_is_a_failed_solve_not_a_wrong_answer(monkeypatch):
    problem = _cut_ratings(monkeypatch, "pglib_opf_case14_ieee", 0.4)
    xi = problem.sample(4, torch.Generator().manual_seed(3))
    results = [problem.lazy_reference(max_rounds=1).solve(x.numpy()) for x in xi]
    stopped = [r for r in results if r.status != "optimal"]
    assert stopped and all(r.status == ROUND_LIMIT_STATUS and np.isnan(r.objective) for r in stopped)
    with pytest.raises(SolverError, match="round limit"):
        problem.solve(xi, max_rounds=1)  # a batch with such an instance fails loudly, as any non-optimal solve


def test_lazy_rows_are_refused_where_they_do_not_apply():
    problem = EconomicDispatch("pglib_opf_case14_ieee")
    assert not problem.resolve_lazy_rows(None, "clarabel")  # another solver solves the whole LP
    with pytest.raises(ValueError, match="data.solver=highs, or data.lazy_rows=false"):
        problem.resolve_lazy_rows(True, "clarabel")
    from hardlinear.problems import build_problem

    other = build_problem("dcopf_14")
    assert not other.resolve_lazy_rows(None, "highs")
    with pytest.raises(ValueError, match="has no lazy rows"):
        other.solve(other.sample(1), lazy_rows=True)
    with pytest.raises(ValueError, match="warm starts are for the whole LP"):
        problem.solve(problem.sample(1), warm_start=np.zeros((1, problem.n)))


def test_the_cache_keeps_lazy_and_whole_lp_sets_apart(tmp_path):
    problem = EconomicDispatch("pglib_opf_case14_ieee")
    full = build_dataset(problem, "val", 3, 0, cache_dir=tmp_path, progress=False, lazy_rows=False)
    # the whole LP's key is the one it had before lazy rows existed: its caches stay valid
    assert dataset_key(problem, "val", 3, 0, "highs") == dataset_key(problem, "val", 3, 0, "highs", lazy_rows=False)
    lazy = build_dataset(problem, "val", 3, 0, cache_dir=tmp_path, progress=False)
    assert not lazy.from_cache and lazy.lazy_rows and not full.lazy_rows
    assert len(list(tmp_path.glob("*.npz"))) == 2
    again = build_dataset(problem, "val", 3, 0, cache_dir=tmp_path, progress=False, lazy_rows=True)
    assert again.from_cache and again.lazy_rows
    assert build_dataset(problem, "val", 3, 0, cache_dir=tmp_path, progress=False, lazy_rows=False).from_cache
    assert np.allclose(lazy.objective.numpy(), full.objective.numpy(), rtol=REL, atol=0)


def test_a_solve_does_not_depend_on_the_instances_solved_before_it():
    """One solver (one HiGHS, reused) over the instances in reverse order gives each the bits a fresh solver gives:
    what lets any process solve any block (data.workers, data.executor)."""
    problem = EconomicDispatch("pglib_opf_case118_ieee")
    xi = problem.sample(5, torch.Generator().manual_seed(5)).numpy()
    fresh = [problem.lazy_reference().solve(x).y for x in xi]
    reused = problem.lazy_reference()
    again = [reused.solve(x).y for x in xi[::-1]][::-1]
    assert all(np.array_equal(a, b) for a, b in zip(fresh, again))
