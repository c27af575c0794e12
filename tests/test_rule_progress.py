"""Every rule solver reports progress from its first seconds: a start line, a heartbeat (elapsed, memory, the
solver's last status) while it runs, an end line; Clarabel's iterations feed it through its callback."""

from __future__ import annotations

import logging
import time

import pytest

from hardlinear.problems import build_problem
from hardlinear.rules import progress, solve_decision_rule
from hardlinear.rules.progress import SolveProgress, report


def test_heartbeat_logs_elapsed_memory_and_status_while_the_solve_runs(caplog):
    caplog.set_level(logging.INFO, logger="hardlinear.rules.progress")
    with SolveProgress("highs", "toy", interval=0.02) as beat:
        report("round 3 of the row generation")
        time.sleep(0.3)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("rule solver highs toy: start,")
    running = [ln for ln in lines if ": running " in ln]
    assert beat.beats >= 2 and len(running) == beat.beats
    assert all("MB" in ln and "round 3 of the row generation" in ln for ln in running)
    assert lines[-1].startswith("rule solver highs toy: finished after") and lines[-1].endswith("done (last: round 3 of the row generation)")
    assert report("outside any solve") is None  # a no-op, no error


def test_heartbeat_stops_and_names_a_failure():
    with pytest.raises(RuntimeError), SolveProgress("clarabel", interval=0.01) as beat:
        raise RuntimeError("boom")
    assert not beat._thread.is_alive() and beat.status == "failed: RuntimeError"
    with pytest.raises(ValueError, match="positive"):
        SolveProgress("clarabel", interval=0)


@pytest.mark.parametrize("solver", ["clarabel", "highs", "sparse", "reduced"])
def test_each_solver_reports_through_the_heartbeat(solver, caplog, monkeypatch):
    """A real rule solve (dcopf_14, uncached): start and end lines name the solver; Clarabel's iterations are logged
    (every one here: the log interval set to 0) with their gap."""
    monkeypatch.setattr(progress, "ITERATION_LOG_S", 0.0)
    caplog.set_level(logging.INFO, logger="hardlinear.rules.progress")
    solve_decision_rule(build_problem("dcopf_14"), solver=solver)
    lines = [r.getMessage() for r in caplog.records if r.name == "hardlinear.rules.progress"]
    assert lines[0].startswith(f"rule solver {solver} dcopf_14: start,")
    assert lines[-1].startswith(f"rule solver {solver} dcopf_14: finished after") and "RSS" in lines[-1]
    iterations = [ln for ln in lines if "Clarabel iteration" in ln]
    assert bool(iterations) == (solver == "clarabel")
    if iterations:
        assert "gap" in iterations[0]
    assert "(last: " in lines[-1]  # the end line carries the solver's last status (an iteration, a round)
