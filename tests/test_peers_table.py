"""The peer-methods table (scripts/peers_table.py) rendered from synthetic records: aggregation over seeds,
not-applicable and failed rows with their reasons, missing seeds said loudly, published rows with sources."""

import pytest

from hardlinear.harness.results import load_records, write_record
from hardlinear.reporting.peers import load_published, method_rows, peers_table


def _record(tmp_path, problem, method, seed, status="ok", reason="", **metrics):
    config = {"problem": {"name": problem}, "method": {"name": method}, "seed": seed, "study": "table_peers",
              "trainer": {"name": "default", "epochs": 300, **metrics.pop("trainer", {})}}
    row = {"problem": problem, "method": method, "seed": seed, "status": status, "form": "standard",
           "n": 10, "m_eq": 2, "m_ineq": 5, **metrics}
    write_record(tmp_path / f"{problem}-{method}-{seed}-{status}", {
        "identity": f"{problem}{method}{seed}{status}", "study": "table_peers", "status": status,
        "reason": reason, "row": row, "config": config,
    })


def _ok(tmp_path, problem, method, seed, gap, worst, ineq, ms=1.0, thr=5000.0, **extra):
    _record(tmp_path, problem, method, seed, **{
        "test/gap_mean": gap, "test/gap_worst": worst, "test/eq_viol_worst": 1e-15, "test/ineq_viol_worst": ineq,
        "test/time_ms": ms, "test/throughput": thr, "test/objective_mean": 10.0 + gap, "train/time_s": 30.0,
        "train/epoch_time_s": 0.1, **extra,
    })


@pytest.fixture
def table(tmp_path):
    _ok(tmp_path, "dcopf_14", "proposed", 0, gap=1.0, worst=4.0, ineq=0.0)
    _ok(tmp_path, "dcopf_14", "proposed", 1, gap=3.0, worst=9.0, ineq=0.0)
    _ok(tmp_path, "dcopf_14", "proposed", 2, gap=2.0, worst=5.0, ineq=2e-3)
    _ok(tmp_path, "dcopf_14", "projection_layer", 0, gap=40.0, worst=50.0, ineq=5e-7, ms=20.0, thr=50.0,
        **{"train/epochs": 2.35, "trainer": {"time_budget_s": 120}})
    for seed in (0, 1, 2):
        _record(tmp_path, "dcopf_14", "hardnet_aff", seed, "not_applicable", "84 inequality rows for 1 free dimension")
    _record(tmp_path, "dcopf_14", "gauge", 0, "failed", "RuntimeError: boom")
    _ok(tmp_path, "dcopf_14", "dc3", 0, gap=-1.0, worst=7.0, ineq=0.2, **{"train/time_s": 0.0})  # trained nothing
    _record(tmp_path, "other_problem", "proposed", 0, **{"test/gap_mean": 99.0})
    df = load_records([tmp_path], study="table_peers", quiet=True)
    published = [{"problem": "dcopf_14 (theirs)", "method": "DC3", "objective_value": "-1.5", "max_eq_viol": "0.00",
                  "max_ineq_viol": "0.00", "test_time": "0.01", "test_time_unit": "s", "train_time_s": "600",
                  "verified": "no", "source": "someone/repo notebook", "note": "a different instance set"}]
    text = peers_table(df.to_dict("records"), published, problems=("dcopf_14",), methods=("proposed", "hardnet_aff", "projection_layer", "gauge", "dc3"),
                       missing_notes={("dcopf_14", "dc3"): "not run (compute): too slow"}, header="# T")
    return {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| ")}, text


def test_ok_rows_aggregate_seeds(table):
    rows, _ = table
    cells = rows["proposed"].split(" | ")
    assert cells[1] == "ok" and cells[2] == "0,1,2"
    assert "2 ± 1" in rows["proposed"]  # gap mean over seeds 1, 3, 2
    assert " 9 " in rows["proposed"] and "2.0e-03" in rows["proposed"]  # the worst over seeds, not a mean
    assert "99" not in "".join(rows.values())  # another problem's record stays out


def test_budget_epochs_and_per_instance_throughput_are_shown(table):
    rows, _ = table
    proj = rows["projection_layer"]
    assert "120 s budget" in proj and "2.35" in proj
    assert "**seeds 1,2: not run (compute)**" in proj
    assert "(1/batch-1)" in proj and "(1/batch-1)" not in rows["proposed"]


def test_not_applicable_failed_and_missing_are_loud(table):
    rows, text = table
    assert "not applicable: 84 inequality rows for 1 free dimension" in rows["hardnet_aff"]
    assert "failed: RuntimeError: boom" in text
    assert "**not run (compute)** | 1,2" in text  # gauge seeds without a record
    assert "ok; **seeds 1,2: not run (compute): too slow** | 0 |" in text
    dc3_ok = next(line for line in text.splitlines() if line.startswith("| dc3 | ok"))
    assert "| no training | — |" in dc3_ok  # a method that trained nothing shows no schedule


def test_published_rows_cite_their_source_and_flag_unverified(table):
    rows, text = table
    assert "published [1], unverified: dcopf_14 (theirs); test time 0.01 s" in rows["DC3 (published)"]
    assert "1. someone/repo notebook" in text and "a different instance set" in text


def test_every_shipped_published_row_has_a_source():
    published = load_published()
    assert published and all(p["source"].strip() for p in published)
    assert any(p["method"] == "HardNet-Aff" for p in published)


def test_a_group_without_records_is_not_run():
    assert method_rows([], "dc3", (0, 1, 2))[0][1] == "**not run (compute)**"
