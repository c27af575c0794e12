"""The dispatch latency benchmark (benchmarks/bench_ed_inference.py): before and after the sparse flows in one
row, its measured floor, and the reference solve read from the committed records."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_ed_inference

    return bench_ed_inference


def test_rows_hold_before_after_floor_and_reference(bench, tmp_path):
    out = tmp_path / "ed_inference.json"
    bench.main(["--cases", "pglib_opf_case14_ieee", "--instances", "4", "--repeats", "2", "--warmup", "1", "--batch", "16",
                "--cache-dir", str(tmp_path), "--problem-overrides", "problem.form=inequality problem.flows=sparse",
                "--out", str(out)])
    data = json.loads(out.read_text())
    rows = data["rows"]
    assert [r["method"] for r in rows] == ["e2elr", "proposed"] and all(r["status"] == "ok" for r in rows)
    for r in rows:
        assert r["flows"] == "sparse -> sparse"
        for label in ("batch1", "batchN"):
            # the proposed method's floor holds the test of its output's rows too (alpha = 0 needs it); E2ELR's has none
            names = ("network", "own_passes", "flows", *(("row_test",) if r["method"] == "proposed" else ()))
            assert (f"{label}_row_test_ms" in r) is (r["method"] == "proposed")
            pieces = [r[f"{label}_{p}_ms"] for p in names]
            assert all(p > 0 for p in pieces) and r[f"{label}_floor_ms"] == pytest.approx(sum(pieces))
            assert r[f"{label}_floor_ratio"] == pytest.approx(r[f"{label}_ms"] / r[f"{label}_floor_ms"])
            assert r[f"before_{label}_ms"] > 0
        # the dense path and the factor give the same dispatch, up to the float32 network's rounding: the proposed
        # method's dispatch path evaluates only the generator columns of its last layer, a product of another shape
        # whose sums the BLAS may order differently (float64 networks agree to 1e-12: tests/test_flows.py)
        assert r["outputs_max_rel_diff"] < (1e-9 if r["method"] == "e2elr" else 1e-6)
        # case14's committed records carry their reference solve time
        assert r["ref_solve_ms"] == bench.reference_solve_ms("pglib_opf_case14_ieee") and r["ref_solve_ms"]
    assert len(data["environment"]["loadavg_start"]) == 3


def test_skip_before_times_only_the_current_path(bench, tmp_path):
    out = tmp_path / "ed_inference.json"
    bench.main(["--cases", "pglib_opf_case14_ieee", "--methods", "e2elr", "--instances", "3", "--repeats", "2",
                "--warmup", "1", "--batch", "8", "--cache-dir", str(tmp_path), "--skip-before",
                "--reference-root", str(tmp_path), "--out", str(out)])
    (row,) = json.loads(out.read_text())["rows"]
    assert row["status"] == "ok" and row["batch1_ms"] > 0 and row["batch1_floor_ms"] > 0
    assert not any(key.startswith("before_") for key in row) and row["outputs_max_rel_diff"] is None
    assert row["ref_solve_ms"] == []  # no record under that root: no reference figure, and no ratio to one
    assert "speedup_vs_ref_batch1" not in row


def test_ratio_rounds_alternate_the_proxies(bench, tmp_path):
    """--ratio-rounds: each proposed variant against E2ELR per round (the order rotated), its median and range; the
    option refuses a method list without both, before any work."""
    out = tmp_path / "ed_inference.json"
    bench.main(["--cases", "pglib_opf_case14_ieee", "--instances", "2", "--repeats", "1", "--warmup", "1", "--batch", "8",
                "--cache-dir", str(tmp_path), "--skip-before", "--ratio-rounds", "3", "--ratio-instances", "2",
                "--proposed-variants", "", "++method.refine_geometry=proportional", "--out", str(out)])
    ratios = json.loads(out.read_text())["ratios"]
    assert [r["variant"].count("proportional") for r in ratios] == [0, 1]
    for r in ratios:
        assert r["status"] == "ok" and r["rounds"] == 3
        for b in ("batch1", "batchN"):
            assert len(r[f"{b}_ratios"]) == 3 and r[f"{b}_ratio_min"] <= r[f"{b}_ratio_median"] <= r[f"{b}_ratio_max"]
            assert r[f"{b}_ratios"] == pytest.approx([p / e for p, e in zip(r[f"{b}_ms"], r[f"{b}_e2elr_ms"])])
    with pytest.raises(SystemExit):
        bench.main(["--cases", "pglib_opf_case14_ieee", "--methods", "e2elr", "--ratio-rounds", "2", "--out", str(out)])
