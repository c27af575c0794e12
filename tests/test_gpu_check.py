"""``make gpu-check``'s dry mode: the GPU pipeline (run.py, records, the latency benchmark) on the CPU at tiny
settings writes its dated folder with every method accounted for. No timing is asserted."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
import torch

BENCH_DIR = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def gpu_check():
    sys.path.insert(0, str(BENCH_DIR))
    import gpu_check

    yield gpu_check
    sys.path.remove(str(BENCH_DIR))


def test_dry_run_writes_the_dated_folder(gpu_check, tmp_path):
    folder = gpu_check.main(["--dry-run", "--out-root", str(tmp_path), "--problems", "dcopf_14",
                             "--methods", "proposed", "hardnet_aff", "no_such_method",
                             "--cache-dir", str(tmp_path / "cache")])  # fmt: skip
    assert folder.parent == tmp_path and folder.name.endswith("-dry")
    with (folder / "pipeline.csv").open(newline="") as f:
        rows = {r["method"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"proposed", "hardnet_aff", "no_such_method"}
    ok = rows["proposed"]
    assert ok["status"] == "ok" and ok["device"].startswith("cpu")
    for key in ("train/epoch_time_s", "test/time_ms", "test/throughput"):
        assert float(ok[key]) > 0, key
    assert float(ok["test/ineq_viol_worst"]) <= 1e-9  # the records' feasibility, evaluated in float64
    assert (folder / ok["run_dir"] / "record.json").exists()
    assert rows["hardnet_aff"]["status"] == "not_applicable" and "row rank" in rows["hardnet_aff"]["reason"]
    assert rows["no_such_method"]["status"] == "missing_config"
    with (folder / "latency_cpu_1t" / "methods.csv").open(newline="") as f:
        lat = list(csv.DictReader(f))
    timed = {r["method"] for r in lat if r["status"] == "ok" and r["batch_size"] == "64"}
    assert {"mlp", "mlp_f64", "proposed"} <= timed
    summary = (folder / "summary.md").read_text()
    assert "DRY RUN" in summary and "| dcopf_14 | proposed | ok |" in summary and "## Latency: latency_cpu_1t" in summary
    assert (folder / "machine.json").exists()
    loops = json.loads((folder / "loops" / "dr.json").read_text())["rows"]  # the compiled loops, checked
    assert loops and all(r["max_rel_diff_vs_cpu_python"] <= 1e-12 for r in loops) and "## Latency: loops" in summary


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the real check would run")
def test_without_cuda_the_real_check_refuses_and_names_the_dry_run(gpu_check, tmp_path):
    with pytest.raises(SystemExit, match="DRY_RUN=1"):
        gpu_check.main(["--out-root", str(tmp_path)])
    assert not list(tmp_path.iterdir())  # refused before any folder is made
