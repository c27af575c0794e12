"""The dispatch rule benchmark (benchmarks/bench_ed_rule.py): each solve in its own process, rank_one and auto's
solver agree on t*, and a case with no rule over its box is a row that says so with the t* it names."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_ed_rule

    return bench_ed_rule


def test_rank_one_and_auto_agree_and_a_missing_rule_is_recorded(bench, tmp_path, monkeypatch, capsys):
    out = tmp_path / "ed_rule.json"
    monkeypatch.setattr(sys, "argv", ["bench_ed_rule.py", "--cases", "pglib_opf_case30_ieee", "pglib_opf_case89_pegase",
                                      "--solvers", "rank_one", "auto", "--out", str(out)])
    bench.main()
    rows = {(r["case"], r["solver"]): r for r in json.loads(out.read_text())["rows"]}
    one, auto = rows["pglib_opf_case30_ieee", "rank_one"], rows["pglib_opf_case30_ieee", "auto"]
    assert one["status"] == auto["status"] == "ok" and one["used"] == "rank_one" and auto["used"] != "rank_one"
    assert one["t_star"] == pytest.approx(auto["t_star"], rel=1e-8) and one["peak_rss_mb"] > 0
    missing = rows["pglib_opf_case89_pegase", "rank_one"]
    assert missing["status"] == "no rule" and missing["t_star"] == pytest.approx(-0.199, abs=1e-3)
    assert "| case89_pegase | inequality | box | rank_one | 35 | no rule |" in capsys.readouterr().out
