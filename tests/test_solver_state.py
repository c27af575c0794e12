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


def test_highs_solves_an_instance_again_by_ipm_when_the_simplex_stops_on_an_error(problem, caplog):
    """At case9241 the dual simplex stops on some dispatch instances with an error and no model status; the solver
    then runs the IPM with crossover. Here the first run is made to report that error without solving."""
    import logging

    import highspy

    class FailingFirstRun:  # HiGHS itself, except that its first run() reports an error
        def __init__(self, highs):
            self._highs, self.runs = highs, 0

        def run(self):
            self.runs += 1
            return highspy.HighsStatus.kError if self.runs == 1 else self._highs.run()

        def __getattr__(self, name):
            return getattr(self._highs, name)

    solver, plain = make_solver(problem, "highs"), make_solver(problem, "highs")
    _, g, _, h = problem.compact.instance(instances(problem, 1)[0])
    solver._h = failing = FailingFirstRun(solver._h)
    with caplog.at_level(logging.INFO, logger="hardlinear.solvers.highs"):
        got = solver.solve(g, h)
    want = plain.solve(g, h)
    assert failing.runs == 2 and got.optimal and got.objective == pytest.approx(want.objective, rel=1e-9)
    assert "solving the instance again by IPM with crossover" in caplog.text
    assert failing.getOptionValue("solver")[1] == "choose"  # the next instance starts with the simplex again
