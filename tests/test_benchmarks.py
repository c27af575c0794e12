"""The benchmarks run end to end at the tiniest settings and write their CSV, JSON and PNG (no timing asserted)."""

from __future__ import annotations

import csv
import importlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

BENCH_DIR = Path(__file__).resolve().parents[1] / "benchmarks"
TINY = ["--problems", "dcopf_14", "--repeats", "3", "--warmup", "1"]


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """Import a benchmark module by name (they live in benchmarks/ and benchmarks/investigations/, not in the package)."""
    folders = [str(BENCH_DIR), str(BENCH_DIR / "investigations")]
    sys.path[:0] = folders
    torch.set_num_threads(1)
    yield lambda name: importlib.import_module(name)
    for folder in folders:
        sys.path.remove(folder)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("cache"))


def read_csv(path: Path) -> tuple[list[str], list[dict]]:
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def check_outputs(result: dict, name: str, columns: list[str]) -> list[dict]:
    paths = result["paths"]
    for kind in ("csv", "json", "png"):
        assert paths[kind].exists() and paths[kind].stat().st_size > 0, f"{name}: no {kind}"
    header, rows = read_csv(paths["csv"])
    assert header == columns
    assert rows, f"{name}: empty CSV"
    assert not [r for r in rows if r.get("status") == "error"]
    meta = json.loads(paths["json"].read_text())
    for key in ("machine", "device", "device_name", "threads", "versions", "git_sha", "date", "settings"):
        assert key in meta, f"{name}.json lacks {key}"
    assert {"platform", "processor", "cores"} <= set(meta["machine"])
    assert {"torch", "numpy", "highspy", "clarabel", "osqp"} <= set(meta["versions"])
    assert meta["threads"] == 1
    return rows


def test_breakdown(bench, cache_dir, tmp_path):
    mod = bench("bench_breakdown")
    result = mod.main(TINY + ["--batch-sizes", "1", "16", "--forms", "standard", "inequality",
                              "--out-dir", str(tmp_path), "--cache-dir", cache_dir])  # fmt: skip
    rows = check_outputs(result, "breakdown", mod.COLUMNS)
    for form in ("standard", "inequality"):
        for B in ("1", "16"):
            sub = [r for r in rows if r["form"] == form and r["batch_size"] == B]
            assert {r["stage"] for r in sub if r["variant"] == "layer"} == set(mod.STAGES + mod.TOTALS)
            # constant G and H (DC-OPF): the dense and sparse alternatives are timed too
            for stage in ("equality_projection", "slacks"):
                assert {r["variant"] for r in sub if r["stage"] == stage} == {"layer", "dense", "sparse"}
    assert all(float(r["median_ms"]) > 0 for r in rows)


def test_breakdown_alternatives_agree_with_layer(bench):
    """The dense and sparse alternatives compute the same projection and slacks as the layer."""
    mod = bench("bench_breakdown")
    from hardlinear.layers.equality import EqualityProjector
    from hardlinear.layers.feasibility import SlackOperator
    from hardlinear.problems import build_problem

    for form in ("standard", "inequality"):
        problem = build_problem("dcopf_14", form=form)
        xi = problem.sample(5, generator=torch.Generator().manual_seed(0))
        y = torch.randn(5, problem.n, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        ref = EqualityProjector(problem.family)(xi, y)
        for variant, (fn, _) in mod.projection_variants(problem.family, "cpu").items():
            torch.testing.assert_close(fn(xi, y), ref, rtol=1e-9, atol=1e-9, msg=f"{form} projection {variant}")
        ops = SlackOperator(problem.family)
        h = ops.rhs(xi, y)
        want = ops.slack(xi, y, h)
        for variant, (fn, _) in mod.slack_variants(problem.family, "cpu").items():
            got, _ = fn(xi, y, y)
            torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9, msg=f"{form} slacks {variant}")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_decision_rule_child_reports_its_own_peak_memory(bench):
    """A parent's peak (ru_maxrss survives fork + exec) must not leak into a child's figure."""
    mod = bench("bench_decision_rules")
    ballast = np.ones(400 * 2**20 // 8)  # 400 MB touched in this (parent) process
    code = f"import sys; sys.path.insert(0, {str(Path(mod.__file__).parent)!r}); import bench_decision_rules as b; print(b.peak_rss_mb())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert float(out.stdout.split()[-1]) < 300 and ballast.sum() > 0


def test_decision_rule_plot_against_buses(bench, tmp_path):
    """Rows of both solvers (the reduced one with a buses column, the interior point's read from the name) land
    on the figure; a portfolio row and an unsolved one do not count."""
    mod = bench("bench_decision_rules")
    assert mod._buses({"case": "pglib_opf_case2000_goc:0.02:areas"}) == 2000
    assert mod._buses({"case": "dcopf_118"}) == 118 and mod._buses({"case": "portfolio"}) is None
    assert mod._buses({"case": "x", "buses": "6470"}) == 6470
    rows = [
        {"case": "dcopf_118", "form": "inequality", "solver": "auto", "t_star": 0.04, "solve_time_s": 1.7, "peak_rss_mb": 380},
        {"case": "pglib_opf_case2000_goc:0.02", "form": "inequality", "solver": "reduced", "t_star": 0.0039,
         "solve_time_s": 433, "peak_rss_mb": 2334, "buses": 2000, "inputs": "all_buses"},
        {"case": "portfolio", "form": "standard", "solver": "auto", "t_star": 0.0, "solve_time_s": 0.2, "peak_rss_mb": 300},
        {"case": "pglib_opf_case9241_pegase:0.02:zones", "form": "inequality", "solver": "reduced", "error": "timeout"},
    ]  # fmt: skip
    path = tmp_path / "rules.csv"
    mod.append_rows(path, rows)
    assert mod.plot_by_buses(path, tmp_path / "rules_buses.png") is not None
    assert (tmp_path / "rules_buses.png").stat().st_size > 0
    assert mod._input_label(rows[1]) == "all loads" and mod._input_label({"inputs": "zones"}) == "zones"
    parts = json.loads(mod._time_parts({"timers_s": {"factor": 1.234}, "seed_time_s": 2.0, "working_set_solver": "sparse"}))
    assert parts == {"factor": 1.23, "seed": 2.0, "working_sets": "sparse"} and mod._time_parts({}) is None


def test_training(bench, cache_dir, tmp_path):
    mod = bench("bench_training")
    result = mod.main(["--problems", "dcopf_14", "--epochs", "1", "--batches-per-epoch", "2", "--val-size", "4",
                       "--out-dir", str(tmp_path), "--cache-dir", cache_dir])  # fmt: skip
    rows = check_outputs(result, "training", mod.COLUMNS)
    assert {(r["method"], r["phase"]) for r in rows} == {
        ("proposed", "pretrain"),
        ("proposed", "train"),
        ("penalty", "train"),
        ("dc3", "train"),
        ("apm", "train"),
        ("eapm", "train"),
    }
    assert all(float(r["epoch_ms"]) > 0 and r["epochs_timed"] == "1" for r in rows)


def test_training_records_a_method_that_does_not_apply(bench, cache_dir, tmp_path):
    mod = bench("bench_training")
    result = mod.main(["--problems", "dcopf_14", "--methods", "hardnet_aff", "gauge", "--epochs", "1", "--batches-per-epoch", "2",
                       "--val-size", "4", "--out-dir", str(tmp_path), "--cache-dir", cache_dir, "--no-plot"])  # fmt: skip
    rows = {r["method"]: r for r in result["rows"]}
    assert rows["hardnet_aff"]["status"] == "not_applicable"
    assert "84 inequality + 122 equality rows for n = 123" in rows["hardnet_aff"]["note"]
    assert rows["gauge"]["status"] == "ok" and float(rows["gauge"]["epoch_ms"]) > 0


def test_training_times_both_projections_and_names_the_one_taken(bench, cache_dir, tmp_path, monkeypatch):
    from hardlinear.layers import equality

    mod = bench("bench_training")
    args = ["--problems", "dcopf_14", "--methods", "proposed", "--train-solves", "auto", "basis", "--epochs", "1",
            "--batches-per-epoch", "2", "--val-size", "4", "--out-dir", str(tmp_path), "--cache-dir", cache_dir]  # fmt: skip
    small = {r["projection"] for r in mod.main(args)["rows"] if r["phase"] == "train"}
    assert small == {"basis"}  # 123 columns: the dense SVD, no Cholesky path to take
    monkeypatch.setattr(equality, "SPARSE_MIN_N", 10)
    rows = mod.main([*args, "--no-plot"])["rows"]
    assert sorted(r["projection"] for r in rows if r["phase"] == "train") == ["basis", "cholesky"]
    assert {r["allocator"] for r in rows} == {"keep_blocks"}


def test_epoch_clock_drops_warmup_and_validation_epochs(bench):
    mod = bench("bench_training")
    clock = mod.EpochClock()
    clock.start = 0.0
    for epoch, (phase, t) in enumerate(
        [("pretrain", 1.0), ("pretrain", 3.0), ("train", 4.0), ("train", 9.0), ("train", 20.0)]
    ):
        clock.stamps.append((epoch, phase, t))
    assert clock.durations() == {"pretrain": [2.0], "train": [5.0]}


def test_run_all_reports_each_benchmark(bench, tmp_path, monkeypatch):
    """run_all's progress and record, with the benchmarks replaced by ones that succeed and fail at once."""
    mod = bench("run_all")
    calls = []

    class Fake:
        def __init__(self, name, fail):
            self.name, self.fail = name, fail

        def main(self, argv):
            calls.append((self.name, argv))
            if self.fail:
                raise RuntimeError("boom")
            return {"paths": {"csv": tmp_path / f"{self.name}.csv"}}

    fakes = {"bench_methods": Fake("bench_methods", False), "bench_breakdown": Fake("bench_breakdown", True)}
    monkeypatch.setattr(mod, "load_benchmark", lambda name: fakes[name])
    status = mod.main(["--quick", "--out-dir", str(tmp_path), "--only", "bench_methods", "bench_breakdown"])
    assert status == 1
    record = json.loads((tmp_path / "run_all.json").read_text())
    assert record["benchmarks"]["bench_methods"]["status"] == "ok"
    assert (
        record["benchmarks"]["bench_breakdown"]["status"] == "failed"
        and "boom" in record["benchmarks"]["bench_breakdown"]["error"]
    )
    assert calls[0][1][:2] == ["--quick", "--device"] and str(tmp_path) in calls[0][1]


def test_gpu_benchmark_runs_on_cpu(bench, cache_dir, tmp_path):
    """bench_gpu at the tiniest settings (CPU rows only here): a rule row per run with the reduced solver's t*,
    the fused layer's rows per dtype and batch with the float64 check of its outputs; a bad case fails first."""
    mod = bench("bench_gpu")
    out = tmp_path / "gpu"
    argv = ["--quick", "--out-dir", str(out), "--cases", "dcopf_14", "--fused-case", "dcopf_14", "--devices", "cpu",
            "--cpu-threads", "1", "--batch-sizes", "1", "16", "--instances", "3", "--repeats", "2", "--warmup", "1",
            "--chunk-rows", "8", "--cache-dir", cache_dir]  # fmt: skip
    assert mod.main(argv) == 0
    _, rule = read_csv(out / "gpu_rule.csv")
    assert [(r["device"], r["threads"], r["status"]) for r in rule] == [("cpu", "1", "ok")]
    assert float(rule[0]["t_star"]) == pytest.approx(0.182, rel=1e-6) and int(rule[0]["newton_steps"]) > 0
    assert float(rule[0]["t_star_rel_diff"]) == 0.0 and float(rule[0]["peak_rss_mb"]) > 0
    _, fused = read_csv(out / "gpu_fused.csv")
    expected = [(dtype, chunk, batch) for dtype in ("float64", "float32") for chunk in ("True", "False") for batch in ("1", "16")]
    assert [(r["layer_dtype_asked"], r["chunk_default"], r["batch_size"]) for r in fused] == expected
    assert {r["chunk_rows"] for r in fused if r["chunk_default"] == "False"} == {"8"}
    assert all(r["status"] == "ok" and r["fused"] == "True" and float(r["median_ms"]) > 0 for r in fused)
    checked = [r for r in fused if r["batch_size"] == "16"]
    assert all(float(r["max_ineq_violation"]) <= 1e-9 and float(r["max_eq_resid"]) <= 1e-4 for r in checked)
    assert json.loads((out / "gpu.json").read_text())["settings"]["cases"] == ["dcopf_14"]
    assert "| cpu | 1 | ok | 0.182" in (out / "gpu_summary.md").read_text()
    with pytest.raises(SystemExit, match="needs its uncertainty"):
        mod.main(["--out-dir", str(out), "--cases", "pglib_opf_case2000_goc"])


def test_profile_pipeline_runs_every_stage(bench, tmp_path):
    """benchmarks/investigations/profile_pipeline.py at 14 buses: every stage runs (checkpoint reload included) and is reported."""
    stages = bench("profile_pipeline").main([
        "--case", "pglib_opf_case14_ieee", "--cache-dir", str(tmp_path / "cache"), "--data", "2", "--steps", "1",
        "--throughput-batch", "16", "--out", str(tmp_path / "profile.json"),
    ])
    names = [s["stage"] for s in stages]
    assert names[0] == "problem build" and names[-1] == "checkpoint save+load" and len(names) == 11
    assert all(s["time_s"] >= 0 and s["peak_rss_mb"] > 0 for s in stages)
    assert stages[-1]["reload"] == "ok"
    assert stages[names.index("metrics (float64)")]["ineq_viol_worst"] == 0.0
    assert json.loads((tmp_path / "profile.json").read_text())["stages"][0]["n"] == 123


def test_run_latency_times_a_reloaded_run_by_both_paths(bench, tmp_path):
    """A finished run reloaded from its checkpoint: fused and unfused rows at each batch, the same outputs up to
    the float32 network's rounding, and the fused outputs feasible."""
    from hydra import compose, initialize_config_dir

    from hardlinear.harness import runner as harness

    overrides = ["problem=dcopf_14", "method=proposed", "trainer=fast", "progress=false", "data.val_size=20", "data.test_size=20",
                 "eval.throughput_batch=64", "eval.warmup=0", "eval.time_instances=2", f"cache_dir={tmp_path / 'cache'}",
                 f"results_dir={tmp_path / 'results'}"]  # fmt: skip
    with initialize_config_dir(config_dir=str(BENCH_DIR.parent / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    assert harness.run(cfg, tmp_path / "run") is not None
    mod = bench("bench_run_latency")
    with pytest.raises(SystemExit, match="no checkpoint.pt in: .*nowhere"):
        mod.main(["--runs", str(tmp_path / "nowhere"), "--out-dir", str(tmp_path / "out")])
    result = mod.main(["--runs", str(tmp_path / "run"), "--batch-sizes", "1", "16", "--instances", "4", "--repeats", "2",
                       "--warmup", "1", "--out-dir", str(tmp_path / "out")])  # fmt: skip
    header, rows = read_csv(result["paths"]["csv"])
    assert header == mod.COLUMNS
    assert {(r["path"], int(r["batch_size"])) for r in rows} == {(p, b) for p in ("fused", "unfused") for b in (1, 16)}
    assert all(float(r["ms_per_instance"]) > 0 and float(r["max_ineq_viol"]) == 0.0 for r in rows)
    assert all(float(r["max_rel_diff"]) <= 1e-5 and float(r["max_eq_resid"]) <= 1e-9 for r in rows)
    assert {r["d"] for r in rows if r["path"] == "fused"} == {"1"}  # dcopf_14's null space
