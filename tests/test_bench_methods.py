"""benchmarks/bench_methods.py: every method config accounted for (timed, not applicable with its reason, or
skipped with it), floors derived from the shapes, ratios against the MLP. No timing is asserted."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest
import torch

BENCH_DIR = Path(__file__).resolve().parents[1] / "benchmarks"
CONF = Path(__file__).resolve().parents[1] / "conf" / "method"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH_DIR))
    import bench_methods
    import floors

    torch.set_num_threads(1)
    yield bench_methods, floors
    sys.path.remove(str(BENCH_DIR))


def test_every_method_config_is_found(bench):
    bench_methods, _ = bench
    assert bench_methods.method_configs() == sorted(p.stem for p in CONF.glob("*.yaml"))


def test_tiny_run(bench, tmp_path):
    bench_methods, floors = bench
    out = bench_methods.main(["--quick", "--problems", "dcopf_14", "--methods", "ldr", "proposed", "hardnet_aff", "dc3",
                              "--batch-sizes", "1", "16", "--instances", "3", "--repeats", "2", "--row-modes", "off", "--call-budget", "600",
                              "--out-dir", str(tmp_path), "--cache-dir", str(tmp_path / "cache")])  # fmt: skip
    with out["paths"]["csv"].open(newline="") as f:
        rows = list(csv.DictReader(f))
    by = {(r["method"], r["batch_size"]): r for r in rows}
    names = {r["method"] for r in rows}
    assert names == {"mlp", "mlp_f64", "ldr", "proposed", "proposed[unfused]", "proposed[row=off]", "hardnet_aff", "dc3"}
    assert by[("hardnet_aff", "")]["status"] == "not_applicable" and "row rank" in by[("hardnet_aff", "")]["note"]
    for name in ("mlp", "ldr", "proposed", "proposed[unfused]", "proposed[row=off]", "dc3"):
        for B in ("1", "16"):
            r = by[(name, B)]
            assert r["status"] == "ok" and float(r["median_ms"]) > 0
            assert float(r["spread_lo_ms"]) <= float(r["median_ms"]) <= float(r["spread_hi_ms"])
            assert float(r["floor_ratio"]) > 0 and float(r["macs_float32"]) + float(r["macs_float64"]) > 0
    assert float(by[("mlp", "1")]["floor_ratio"]) == pytest.approx(1.0)
    assert float(by[("dc3", "1")]["iterations_mean"]) >= 1  # an iterative method reports its iterations
    assert by[("proposed", "1")]["floor_exact"] == "True" and by[("proposed[unfused]", "1")]["floor_exact"] == "False"
    table = out["paths"]["md"].read_text()
    assert "### dcopf_14" in table and "| hardnet_aff | not_applicable |" in table


def test_fused_floor_is_derived_from_its_shapes(bench, tmp_path):
    """The fused path's floor: hidden layers and ``A_T`` in float32; ``M_T``, the completion and the two rank-d
    updates (the second for the moved rows only) in float64, as its docstring derives."""
    bench_methods, floors = bench
    import common

    problem = common.load_problem("dcopf_14")
    args = type("A", (), {"cache_dir": str(tmp_path / "cache"), "device": "cpu", "seed": 0})()
    method, _, _ = common.make_method("dcopf_14", "proposed", problem, common.make_context(args))
    fused = method.fused_module()
    f = floors.floor(method, moved=0.25)
    f32 = sum(W.numel() for W, _ in fused.hidden) + fused.A_T.numel()
    f64 = fused.M_T.numel() + fused.completion._nnz() + 1.25 * fused.N_T.numel()
    assert f.exact and f.macs["float32"] == f32 and f.macs["float64"] == pytest.approx(f64)
    mlp_macs = floors.network(method.net).macs["float32"]
    assert f32 < mlp_macs  # the last layer onto d null coordinates instead of n outputs


def test_each_checkpoint_of_one_method_gets_a_row_of_its_own(bench):
    """A plain and a refined proposed run of one problem are both timed (the peers table needs both), row-mode rows
    take the first run's weights, variants with overrides stay fresh, and another instance's run is not used."""
    bench_methods, _ = bench
    names = ["mlp", "proposed", "proposed[unfused]", "proposed[row=off]", "gauge"]
    checkpoints = {("dc3_qp_eq50_ineq50", "proposed"): ["runs/plain", "runs/refined"],
                   ("dc3_qp_eq10_ineq50", "gauge"): ["runs/other-instance"]}  # fmt: skip
    rows, dirs = bench_methods.with_checkpoints(names, "dc3_qp_eq50_ineq50", checkpoints)
    assert rows == ["mlp", "proposed", "proposed[checkpoint 2]", "proposed[unfused]", "proposed[row=off]", "gauge"]
    assert dirs == {"proposed": "runs/plain", "proposed[checkpoint 2]": "runs/refined", "proposed[row=off]": "runs/plain"}
    assert bench_methods.config_of("proposed[checkpoint 2]") == "proposed"
