"""The rule-solver sweep's bookkeeping (benchmarks/bench_rule_solvers.py): a child over its memory cap is killed and
recorded as such, never as a time; ``--against-auto`` gives the other solvers a budget derived from auto's own
time and copies auto's solve from a reference instead of rerunning it; the table says when every other solver ran
at least auto's time, and lists a case that did not build instead of dropping it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CASE = "pglib_opf_case14_ieee"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_rule_solvers

    return bench_rule_solvers


@pytest.fixture(scope="module")
def features():
    rows = json.loads((REPO / "results" / "bench" / "rule_solvers_small.json").read_text())["rows"]
    return next(r["features"] for r in rows if r["case"] == CASE and r.get("features"))


def test_a_child_over_its_memory_cap_is_killed_and_has_no_time(bench, tmp_path):
    row = bench.run_child(CASE, "highs", 0.02, budget=600, log_dir=tmp_path, max_rss_mb=40)
    assert row["memory_exceeded"] and row["solve_time_s"] is None and not row.get("timeout")
    assert row["peak_rss_mb"] > 40 and "MB memory" in row["note"] and "error" not in row


def test_against_auto_copies_autos_solve_and_derives_the_others_budget(bench, features, tmp_path):
    choice = bench._auto_choice(features)
    other = next(s for s in ("highs", "clarabel") if s != choice)
    reference = tmp_path / "ref.json"
    auto_row = {"case": CASE, "solver": choice, "features": features, "solve_time_s": 0.5, "t_star": 0.295, "budget_s": 3600}
    reference.write_text(json.dumps({"settings": {"budget_s": 3600}, "rows": [auto_row]}))
    out = tmp_path / "out.json"
    record = bench.sweep([CASE], [choice, other], 0.02, 3600, out, tmp_path / "logs", against_auto=3.0, min_budget=0.1,
                         references=[reference], max_rss_mb=40)  # the other solver is stopped by the cap, at once
    copied, ran = record["rows"]
    assert copied["solver"] == choice and copied["copied_from"].endswith("ref.json") and copied["solve_time_s"] == 0.5
    assert ran["solver"] == other and ran["budget_s"] == pytest.approx(1.5) and ran["memory_exceeded"]
    assert json.loads(out.read_text())["settings"]["against_auto"] == 3.0


def _record(features, runs):
    return {"settings": {"budget_s": 3600}, "rows": [{"case": CASE, "features": features, "peak_rss_mb": 300.0, **r} for r in runs]}


def test_the_table_says_when_every_other_solver_ran_at_least_autos_time(bench, features):
    choice = bench._auto_choice(features)
    others = [s for s in bench._candidates(features) if s != choice]
    finished = {"solver": choice, "solve_time_s": 10.0, "t_star": 0.295, "budget_s": 3600}
    outlasted = [{"solver": s, "timeout": True, "solve_time_s": None, "budget_s": 10.0} for s in others]
    (entry,) = bench.case_table([_record(features, [finished, *outlasted])])
    assert entry["auto_over_fastest"] == 1.0 and entry["others_ran_its_time"]
    assert "the others ran its time)" in bench.markdown_table([_record(features, [finished, *outlasted])])
    short = [{**outlasted[0], "budget_s": 5.0}, *outlasted[1:]]  # one was stopped before auto's time: not shown
    (entry,) = bench.case_table([_record(features, [finished, *short])])
    assert not entry["others_ran_its_time"]
    assert "the only one to finish" in bench.markdown_table([_record(features, [finished, *short])])
    capped = [{"solver": others[0], "memory_exceeded": True, "solve_time_s": None, "killed_after_s": 2.0}, *outlasted[1:]]
    table = bench.markdown_table([_record(features, [finished, *capped])])
    assert f"the others ran its time; memory cap: {others[0]})" in table and "MB at 2.0 s" in table


def test_a_case_that_did_not_build_is_listed_not_dropped(bench, features):
    record = _record(features, [{"solver": "reduced", "solve_time_s": 1.0, "t_star": 0.295}])
    record["rows"].append({"case": "pglib_opf_case1803_snem", "solver": "reduced",
                           "error": " exit 1: Traceback\nValueError: branches with zero reactance cannot enter a DC model"})
    table = bench.markdown_table([record])
    assert "case1803_snem: no row, the problem does not build: ValueError: branches with zero reactance" in table


def test_a_case_that_does_not_build_is_recorded_and_a_case_never_run_is_named(bench, features, tmp_path):
    record = bench.sweep(["pglib_opf_case1803_snem"], ["reduced"], 0.02, 60, tmp_path / "out.json", tmp_path, against_auto=1.0)
    (row,) = record["rows"]
    assert "zero reactance" in row["error"] and not row.get("features")
    table = bench.markdown_table([record, _record(features, [{"solver": "reduced", "solve_time_s": 1.0, "t_star": 0.295}])],
                                 expected=[CASE, "pglib_opf_case1803_snem", "pglib_opf_case30_ieee"])
    assert "case1803_snem: no row, the problem does not build" in table
    assert table.endswith("No row (no solve recorded in these JSONs): case30_ieee")


def test_autos_choice_stopped_at_the_budget_is_copied_and_the_others_keep_the_whole_budget(bench, features, tmp_path):
    choice = bench._auto_choice(features)
    other = next(s for s in ("highs", "clarabel") if s != choice)
    reference = tmp_path / "ref.json"
    stopped = {"case": CASE, "solver": choice, "features": features, "timeout": True, "solve_time_s": None,
               "budget_s": 3600.0, "peak_rss_mb": 900.0}
    reference.write_text(json.dumps({"settings": {"budget_s": 3600}, "rows": [stopped]}))
    record = bench.sweep([CASE], [choice, other], 0.02, 3600, tmp_path / "out.json", tmp_path / "logs", against_auto=0.5,
                         min_budget=0.1, references=[reference], max_rss_mb=40)
    copied, ran = record["rows"]
    assert copied["solver"] == choice and copied["timeout"] and copied["copied_from"].endswith("ref.json")
    assert ran["solver"] == other and ran["budget_s"] == 3600.0 and ran["memory_exceeded"]


def test_the_table_names_autos_choice_that_ran_past_its_budget(bench, features):
    choice = bench._auto_choice(features)
    others = [s for s in bench._candidates(features) if s != choice]
    stopped = {"solver": choice, "timeout": True, "solve_time_s": None, "budget_s": 3600.0}
    capped = [{"solver": s, "memory_exceeded": True, "solve_time_s": None, "killed_after_s": 50.0, "note": "> 8000 MB memory"} for s in others]
    (entry,) = bench.case_table([_record(features, [stopped, *capped])])
    assert entry["auto_stopped"] and not entry["auto_missed"]
    assert "none finished (auto's choice ran past 3600 s; memory cap: " in bench.markdown_table([_record(features, [stopped, *capped])])
    beaten = [{"solver": others[0], "solve_time_s": 900.0, "t_star": 0.295, "budget_s": 3600.0}, *capped[1:]]
    (entry,) = bench.case_table([_record(features, [stopped, *beaten])])
    assert entry["auto_missed"] and entry["auto_over_fastest"] is None
    assert f"miss: ran past 3600 s, {others[0]} finished" in bench.markdown_table([_record(features, [stopped, *beaten])])


def test_a_skip_in_one_json_never_hides_a_run_in_another(bench, features):
    choice = bench._auto_choice(features)
    run = _record(features, [{"solver": choice, "solve_time_s": 10.0, "t_star": 0.295, "budget_s": 3600}])
    skip = _record(features, [{"solver": choice, "timeout": True, "solve_time_s": None, "budget_s": 3600,
                               "note": "> 3600 s budget (not run: ran past 3600 s on the smaller case)"}])
    for records in ([run, skip], [skip, run]):
        (entry,) = bench.case_table(records)
        assert entry["auto_s"] == 10.0


def test_a_time_kill_skips_larger_cases_only_for_solvers_whose_time_follows_size(bench):
    timed_out = {"timeout": True, "solve_time_s": None, "note": "> 3600 s budget (killed)"}
    assert bench._hit_limit({**timed_out, "solver": "clarabel"}, per_case_budgets=False)
    assert not bench._hit_limit({**timed_out, "solver": "reduced"}, per_case_budgets=False)  # rounds, not size
    assert not bench._hit_limit({**timed_out, "solver": "clarabel"}, per_case_budgets=True)
    assert bench._hit_limit({"solver": "reduced", "memory_exceeded": True, "note": "> 8000 MB memory"}, per_case_budgets=False)


def test_other_inputs_are_a_different_rule_named_in_the_row_and_the_log(bench, tmp_path):
    row = bench.run_child(CASE, "reduced", 0.02, budget=600, log_dir=tmp_path, inputs="zones")
    assert row["inputs"] == "zones" and row["features"]["k"] == 1  # case14 has one zone: all loads move together
    assert row["t_star"] > 0 and row["log"].endswith(f"{CASE}.zones.reduced.log")
    every_bus = bench.run_child(CASE, "none", 0.02, budget=600, log_dir=tmp_path)
    assert "inputs" not in every_bus and every_bus["features"]["k"] == 14


def test_the_highs_log_holds_pdlps_iterations(bench, tmp_path):
    row = bench.run_child(CASE, "pdlp", 0.02, budget=600, log_dir=tmp_path, highs_log=True)
    assert row["t_star"] == pytest.approx(0.295, rel=1e-5) and "error" not in row
    log = (tmp_path / f"{CASE}.pdlp.highs").read_text()
    assert "Iter" in log and "PDLP      iterations:" in log


def test_other_inputs_stay_out_of_autos_comparison_and_the_cost_model(bench, features):
    from hardlinear.problems.dcopf import INPUT_MODES

    assert bench.INPUT_MODES == INPUT_MODES
    with pytest.raises(SystemExit):
        bench.main(["--inputs", "zones", "--against-auto", "1", "--cases", CASE])
    every_bus = {"solver": "reduced", "solve_time_s": 1.0, "t_star": 0.295}
    zones = {**every_bus, "inputs": "zones", "solve_time_s": 100.0}
    fit = bench.fit_cost_model([_record(features, [every_bus, zones])])
    assert [p["seconds"] for p in fit["reduced"]["points"]] == [1.0]
    table = bench.markdown_table([_record(features, [every_bus, zones])])
    assert "| case14_ieee |" in table and "| case14_ieee (inputs=zones) |" in table
    (zoned,) = [e for e in bench.case_table([_record(features, [every_bus, zones])]) if "(inputs=zones)" in e["case"]]
    assert zoned["auto_over_fastest"] is None and not zoned["auto_stopped"]  # auto is judged on every-bus rows only


@pytest.mark.parametrize("case", [CASE, "pglib_opf_case30_ieee"])
def test_the_working_set_lps_size_is_counted_as_robust_lp_builds_it(case):
    sys.path.insert(0, str(REPO / "benchmarks" / "investigations"))
    import numpy as np
    from working_set_lp_size import working_set_lp_nnz

    from hardlinear.problems import build_problem
    from hardlinear.rules.robust_lp import _reduce, _seed, _working_set_lp, row_weights

    problem = build_problem("dcopf", case=case, uncertainty=0.02)
    red = _reduce(problem.compact, row_weights(problem.compact.H, problem.form), None)
    S = _seed(red)
    lp = _working_set_lp(red, S)
    counted = working_set_lp_nnz(np.asarray(red.M[S]), red.lower[S], red.C.shape[1])
    assert counted["nnz_eq"] == lp["Aeq"].nnz and counted["nnz_ineq"] == lp["Ain"].nnz
    assert counted["variables"] == lp["nv"] and counted["copies_of_M_S"] == red.C.shape[1]
