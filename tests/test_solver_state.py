"""``warm_start=PREVIOUS``: re-solving from the backend's own state gives the cold solve's optimum."""

import numpy as np
import pytest

from hardlinear.problems import build_problem
from hardlinear.solvers import PREVIOUS, SolverUnavailable, make_solver, solver_class


@pytest.fixture(scope="module")
def problem():
    return build_problem("dcopf_57")


def instances(problem, count: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    box = problem.box
    mu, rho = np.asarray(box.mid, dtype=float), np.asarray(box.radius, dtype=float)
    return [mu + rho * rng.uniform(-1, 1, size=problem.k) for _ in range(count)]


@pytest.mark.parametrize("name", ["highs", "gurobi", "osqp"])
def test_previous_state_reaches_the_cold_optimum(problem, name):
    try:
        warm, cold = make_solver(problem, name), make_solver(problem, name)
    except SolverUnavailable as err:
        pytest.skip(str(err))
    assert solver_class(name).supports_previous_state
    xs = instances(problem, 4)
    warm.solve(*problem.compact.instance(xs[0])[1::2])
    for x in xs[1:]:
        _, g, _, h = problem.compact.instance(x)
        a, b = warm.solve(g, h, warm_start=PREVIOUS), cold.solve(g, h)
        assert a.optimal and b.optimal
        assert a.objective == pytest.approx(b.objective, rel=1e-5 if name == "osqp" else 1e-9)
        if name == "highs":  # the dual simplex restarts from the previous basis
            assert a.iterations < b.iterations


def test_clarabel_keeps_no_state():
    assert not solver_class("clarabel").supports_previous_state
