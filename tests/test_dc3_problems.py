"""DC3's benchmark QPs: the generator draw for draw, its split, the problems, and DC3's completion basis."""

import numpy as np
import pytest
import torch

from hardlinear.problems import build_problem
from hardlinear.problems.dc3 import dc3_simple_data


def test_generator_is_deterministic_and_seeded():
    a, b = dc3_simple_data(num_examples=50), dc3_simple_data(num_examples=50)
    for name in ("Q", "p", "A", "X", "G", "h", "partial_vars"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    other = dc3_simple_data(num_examples=50, seed=18)
    assert not np.array_equal(a.A, other.A)


def test_generator_follows_dc3s_legacy_stream_in_its_order():
    """DC3 seeds NumPy's global legacy stream with 17 and draws Q's diagonal, p, A, X, G in this order."""
    state = np.random.get_state()
    try:
        np.random.seed(17)
        diag, p = np.random.random(100), np.random.random(100)
        A = np.random.normal(loc=0, scale=1.0, size=(30, 100))
        X = np.random.uniform(-1, 1, size=(40, 30))
        G = np.random.normal(loc=0, scale=1.0, size=(70, 100))
    finally:
        np.random.set_state(state)
    d = dc3_simple_data(num_eq=30, num_ineq=70, num_examples=40)
    assert np.array_equal(np.diag(d.Q), diag) and np.array_equal(d.p, p)
    assert np.array_equal(d.A, A) and np.array_equal(d.X, X) and np.array_equal(d.G, G)


def test_defining_properties_and_split():
    d = dc3_simple_data()  # DC3's 50/50 dataset, 10,000 examples
    assert np.allclose(d.h, np.abs(d.G @ np.linalg.pinv(d.A)).sum(axis=1))
    assert d.X.min() >= -1.0 and d.X.max() <= 1.0
    assert np.allclose(d.Q, np.diag(np.diag(d.Q))) and np.all(np.diag(d.Q) >= 0)
    splits = d.splits()
    assert [len(splits[s]) for s in ("train", "val", "test")] == [8334, 833, 833]
    assert np.array_equal(np.concatenate([splits["train"], splits["val"], splits["test"]]), d.X)
    # y = pinv(A) x is feasible for every input of the box: the reason for DC3's h
    y = d.X @ np.linalg.pinv(d.A).T
    assert np.abs(y @ d.A.T - d.X).max() < 1e-10 and (y @ d.G.T - d.h).max() <= 1e-12
    # DC3's partial variables leave a nonsingular dependent block
    other = np.setdiff1d(np.arange(100), d.partial_vars)
    assert len(d.partial_vars) == 50 and abs(np.linalg.det(d.A[:, other])) >= 1e-4


def test_generator_rejects_impossible_sizes():
    with pytest.raises(ValueError, match="num_eq < num_var"):
        dc3_simple_data(num_var=10, num_eq=10)


def test_dc3_qp_problem_uses_dc3s_data_and_split():
    p = build_problem("dc3_qp", num_eq=10, num_ineq=30, num_examples=120)
    assert p.sizes() == {"n": 100, "m_eq": 10, "m_ineq": 30, "k": 10} and p.form == "inequality"
    assert p.name == "dc3_qp_eq10_ineq30" and p.objective_kind == "qp"
    assert [len(p.inputs_for(s)) for s in ("train", "val", "test")] == [100, 10, 10]
    xi = torch.as_tensor(p.inputs_for("test"))
    y = xi @ torch.as_tensor(np.linalg.pinv(p.data.A)).T
    assert p.eq_resid(xi, y).abs().max() < 1e-10 and p.ineq_resid(xi, y).max() <= 1e-12
    expected = 0.5 * ((y @ torch.as_tensor(p.data.Q)) * y).sum(1) + y @ torch.as_tensor(p.data.p)
    assert torch.allclose(p.objective(xi, y), expected)


def test_dc3_nonconvex_objective_and_local_reference():
    from hardlinear.solvers import SolverUnavailable, make_solver

    p = build_problem("dc3_nonconvex", num_eq=10, num_ineq=10, num_var=20, num_examples=30)
    assert p.objective_kind == "nonconvex" and p.default_solver() == "slsqp"
    xi = torch.as_tensor(p.inputs_for("test")[:2])
    start = xi @ torch.as_tensor(np.linalg.pinv(p.data.A)).T
    expected = 0.5 * ((start @ torch.as_tensor(p.data.Q)) * start).sum(1) + torch.sin(start) @ torch.as_tensor(p.data.p)
    assert torch.allclose(p.objective(xi, start), expected)
    sol = p.solve(xi)
    y = torch.as_tensor(sol.y)
    assert sol.all_optimal and p.eq_resid(xi, y).abs().max() < 1e-7 and p.ineq_resid(xi, y).max() < 1e-7
    assert np.all(sol.objective <= p.objective(xi, start).numpy() + 1e-9)  # no worse than its start
    with pytest.raises(SolverUnavailable, match="nonconvex"):
        make_solver(p, "clarabel")


def test_dc3_completion_with_dc3s_partial_variables():
    """The correction's step size depends on the partial variables: on DC3's 50/50 dataset its own make
    ||H P|| ~30x larger than the pivoted ones (1905 against 58), so its lr moves ~1000x further."""
    from hardlinear.layers.peers.dc3 import EqualityCompletion, GradientCorrection

    p = build_problem("dc3_qp")
    ours = EqualityCompletion(p.family)
    dc3s = EqualityCompletion(p.family, partial_idx=p.completion_partial_vars())
    assert np.array_equal(dc3s.partial_idx.numpy(), np.sort(p.data.partial_vars))
    xi = torch.as_tensor(p.inputs_for("test")[:20])
    z = torch.randn(xi.shape[0], 50, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert p.eq_resid(xi, dc3s(xi, z)).abs().max() < 1e-9
    norm = {name: torch.linalg.matrix_norm(GradientCorrection(c).ineq_jacobian(xi, torch.float64), ord=2).item() for name, c in (("ours", ours), ("dc3", dc3s))}
    assert norm["dc3"] > 10 * norm["ours"]
    with pytest.raises(ValueError, match="dependent variables"):
        EqualityCompletion(p.family, partial_idx=np.arange(10))


def test_dc3_reference_rows_cite_their_source_and_reach_the_table():
    import pandas as pd

    from hardlinear.reporting.dc3_reference import dc3_rows, dc3_table

    rows = dc3_rows()
    assert rows and all(r.source.strip() for r in rows)
    assert all(r.dataset.startswith("dc3_") for r in rows)
    ours = pd.DataFrame([{
        "problem": "dc3_qp_eq50_ineq50", "method": "dc3", "variant": "", "seed": 0, "git_sha": "abc",
        "test/objective_mean": -13.9, "test/eq_max_mean": 1e-13, "test/ineq_max_mean": 3e-4, "test/gap_mean": 7.0, "test/time_ms": 1.0,
    }])
    text = dc3_table(ours)
    assert "ours: dc3 seed 0 | -13.90" in text and "DC3 paper: DC3 | -13.46" in text
    assert all(r.verified in ("yes", "no") for r in rows)
    published = next(line for line in text.splitlines() if "DC3 paper: DC3 | -13.46" in line)
    # a figure not carried is an empty cell, never a zero; a second-hand figure says so
    assert published.startswith("| dc3_qp_eq50_ineq50 | DC3 paper: DC3 | -13.46 |  | 2e-4 |  |  | unverified: ")
