"""A run records its stages' wall times (``time/*_s``, summing to ``time/run_s``) and scripts/time_attribution.py
splits a study's time by them; the committed paper study, recorded before them, splits as offline / data /
train+val only and says so."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

REPO = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("time_attribution", REPO / "scripts" / "time_attribution.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_run_records_stage_times_that_sum_to_its_wall_time(tmp_path, capsys):
    from hardlinear.harness.runner import run

    overrides = ["problem=dcopf_14", "method=penalty", "trainer=fast", "eval.throughput_batch=64", "eval.warmup=1",
                 "progress=false", "data.val_size=8", "data.test_size=8", f"cache_dir={tmp_path / 'cache'}",
                 f"results_dir={tmp_path}", "study=attr"]
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        cfg = compose(config_name="config", overrides=overrides)
    run_dir = tmp_path / "run"
    row = run(cfg, run_dir)
    stages = {k: row[k] for k in row if k.startswith("time/") and k != "time/run_s"}
    assert set(stages) == {f"time/{s}_s" for s in _script().STAGES}
    assert all(v >= 0 for v in stages.values())
    assert sum(stages.values()) == pytest.approx(row["time/run_s"], rel=1e-9)
    with (run_dir / "epochs.csv").open(newline="") as fh:
        per_epoch = [float(r["time/val_s"]) for r in csv.DictReader(fh)]
    assert len(per_epoch) == 4 and 0 < sum(per_epoch) <= row["time/val_s"]  # the final validation adds to them
    # the script reads it back and attributes every second of it
    script = _script()
    assert script.main(["--results", str(tmp_path), "--study", "attr", "--json", str(tmp_path / "a.json")]) == 0
    report = json.loads((tmp_path / "a.json").read_text())
    penalty = report["methods"]["penalty"]
    assert penalty["exact_runs"] == 1 and penalty["total_s"] == pytest.approx(row["time/run_s"], rel=1e-9)
    assert sum(penalty["share"].values()) == pytest.approx(1.0)
    assert report["epochs_csv_val_s"]["penalty"] == pytest.approx(sum(per_epoch))
    assert "| penalty | 1 |" in capsys.readouterr().out


def test_the_paper_study_splits_only_as_its_records_allow(capsys):
    script = _script()
    assert script.main(["--results", str(REPO / "results/paper/runs.csv")]) == 0
    out = capsys.readouterr().out
    assert "0 with stage timings" in out and "train+val" in out and "eval" not in out.split("\n")[1]
    assert script.main(["--results", str(REPO / "no/such/dir")]) == 2
