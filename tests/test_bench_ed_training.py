"""The dispatch training-step benchmark (benchmarks/bench_ed_training.py): a row per method with its step times,
and a method that cannot be set up is a row that says why."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_ed_training

    return bench_ed_training


def test_each_method_gets_a_timed_row_and_a_failed_setup_says_why(bench, tmp_path):
    out = tmp_path / "ed_training.json"
    bench.main(["--cases", "pglib_opf_case14_ieee", "--steps", "3", "--warmup", "1", "--cache-dir", str(tmp_path),
                "--proposed-variants", "", "problem.case=pglib_opf_case89_pegase problem.form=inequality method.rule_solver=rank_one", "--out", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [r["method"] for r in rows] == ["e2elr", "proposed", "proposed"]
    ok, refused = rows[:2], rows[2]
    assert all(r["status"] == "ok" and r["steps"] == 3 and 0 < r["step_min_ms"] <= r["step_ms"] for r in ok)
    assert ok[0]["batch_size"] == 32 and ok[1]["m_ineq"] > 0 and refused["case"] == "case89_pegase"
    # case89 has no rule over its box (t* = -0.199): the method cannot be set up, and the row says so
    assert refused["status"] == "failed" and "rule" in refused["note"]


def test_too_few_steps_are_refused(bench, tmp_path):
    with pytest.raises(SystemExit):
        bench.main(["--cases", "pglib_opf_case14_ieee", "--steps", "1", "--out", str(tmp_path / "x.json")])
