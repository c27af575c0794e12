"""Loggers: the CSV epoch log, and an offline W&B run read back from its ``.wandb`` file (no network)."""

from __future__ import annotations

import csv
import json
import math
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from hardlinear.harness.loggers import CSVLogger, MultiLogger, WandbLogger, make_loggers, wandb_labels

WANDB_HEADER = 7  # ":W&B", a 2-byte magic, a version byte
BLOCK = 32768  # the LevelDB log format W&B writes: 32 KiB blocks of checksummed records


def read_wandb_records(path: Path) -> list:
    """Protobuf records of a ``run-*.wandb`` file (W&B's LevelDB-style log), parsed with W&B's own proto."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, payloads, partial = WANDB_HEADER, [], b""
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:  # block trailer
            pos += left
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        if pos + 7 + length > len(data):  # a record still being written
            break
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 1:
            payloads.append(chunk)
        elif kind == 2:
            partial = chunk
        elif kind == 3:
            partial += chunk
        elif kind == 4:
            payloads.append(partial + chunk)
    return [pb.Record.FromString(p) for p in payloads]


def finished_records(wandb_file: Path, timeout_s: float = 30.0) -> list:
    """The run's records once its exit record is written: W&B's service may still be flushing its log when
    ``finish()`` returns."""
    deadline = time.monotonic() + timeout_s
    records = read_wandb_records(wandb_file)
    while not any(r.WhichOneof("record_type") == "exit" for r in records) and time.monotonic() < deadline:
        time.sleep(0.2)
        records = read_wandb_records(wandb_file)
    return records


def _items(items) -> dict:
    return {(it.key or "/".join(it.nested_key)): json.loads(it.value_json) for it in items}


@pytest.fixture
def wandb_env(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    for var, sub in (("WANDB_DIR", "wb"), ("WANDB_CACHE_DIR", "wb_cache"), ("WANDB_CONFIG_DIR", "wb_config"), ("WANDB_DATA_DIR", "wb_data")):
        (tmp_path / sub).mkdir()
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    return tmp_path


def test_csv_logger(tmp_path):
    lg = CSVLogger(tmp_path / "run")
    lg.log_config({"seed": 0, "problem": {"name": "dcopf_14"}})
    lg.log_epoch(0, {"phase": "pretrain", "train/loss": 2.0, "val/gap_mean": 5.0})
    lg.log_epoch(1, {"phase": "pretrain", "train/loss": 1.0, "val/gap_mean": 4.0})
    lg.log_epoch(2, {"phase": "train", "train/loss": 0.5, "val/gap_mean": float("nan"), "train/alm_rho": 10.0})
    lg.log_final({"test/gap_mean": 1.25})
    lg.log_table("per_instance", pd.DataFrame({"gap": [0.1, 0.2]}))
    lg.finish()
    with open(tmp_path / "run" / "epochs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    header = list(rows[0])
    assert header[:3] == ["epoch", "phase", "train/loss"] and set(header[3:]) == {"val/gap_mean", "train/alm_rho"}
    assert [r["epoch"] for r in rows] == ["0", "1", "2"]
    assert rows[0]["train/alm_rho"] == "" and rows[2]["train/alm_rho"] == "10.0"
    assert math.isnan(float(rows[2]["val/gap_mean"])) and float(rows[1]["val/gap_mean"]) == 4.0
    assert json.loads((tmp_path / "run" / "final.json").read_text()) == {"test/gap_mean": 1.25}
    assert json.loads((tmp_path / "run" / "config.json").read_text())["problem"]["name"] == "dcopf_14"
    assert (tmp_path / "run" / "tables" / "per_instance.csv").read_text().splitlines() == ["gap", "0.1", "0.2"]


def test_make_loggers_names():
    with pytest.raises(ValueError, match="choose from"):
        make_loggers(["csv", "tensorboard"], "unused")


def test_missing_wandb_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # what a missing package looks like to `import`
    with pytest.raises(ImportError, match=r"pip install 'hardlinear\[wandb\]'"):
        WandbLogger(tmp_path, mode="offline")


def test_wandb_offline_run_round_trip(wandb_env):
    run_dir = wandb_env / "run"
    loggers = make_loggers(["csv", "wandb"], str(run_dir), project="hardlinear", config={"seed": 3, "method": "proposed"}, name="t", tags=["test"])
    assert isinstance(loggers, MultiLogger) and [type(lg).__name__ for lg in loggers.loggers] == ["CSVLogger", "WandbLogger"]
    assert loggers.loggers[1].run.settings.mode == "offline"
    for epoch in range(3):
        loggers.log_epoch(epoch, {"phase": "train", "train/loss": 1.0 / (epoch + 1), "val/gap_mean": 10.0 - epoch})
    loggers.log_final({"test/gap_mean": 0.75, "test/max_abs_viol": 1e-17})
    loggers.finish()

    (wandb_file,) = (run_dir / "wandb").glob("offline-run-*/run-*.wandb")
    records = finished_records(wandb_file)
    history = [_items(r.history.item) for r in records if r.WhichOneof("record_type") == "history"]
    assert [h["epoch"] for h in history] == [0, 1, 2]
    assert [h["train/loss"] for h in history] == [1.0, 0.5, 1.0 / 3]
    assert history[-1]["val/gap_mean"] == 8.0
    summary = {}
    for r in records:
        if r.WhichOneof("record_type") == "summary":
            summary.update(_items(r.summary.update))
    assert summary["test/gap_mean"] == 0.75 and summary["test/max_abs_viol"] == 1e-17
    (run,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    config = _items(run.config.update)
    assert config["seed"] == 3 and config["method"] == "proposed"
    assert (run_dir / "epochs.csv").exists()  # the CSV log ran beside it


def test_wandb_labels_group_by_study_and_name_the_run():
    config = {
        "problem": {"name": "dcopf_14", "objective": "lp", "form": "standard"},
        "method": {"name": "proposed"}, "trainer": {"name": "fast"}, "seed": 2, "experiment": "table_lp",
    }
    labels = wandb_labels(config, variant="gradient=ste")
    assert labels == {
        "name": "dcopf_14-proposed-gradient_ste-seed2", "group": "table_lp",
        "tags": ["dcopf_14", "proposed", "lp", "standard", "trainer=fast"], "job_type": "train",
    }
    assert wandb_labels({**config, "evaluated": {"run_dir": "r"}})["job_type"] == "eval"  # evaluate.py's records
    assert wandb_labels({**config, "study": "my-sweep"})["group"] == "my-sweep"  # the study wins
    assert wandb_labels({**config, "experiment": ""})["group"] == "default"  # results.study_of: never ungrouped
    assert wandb_labels(config)["name"] == "dcopf_14-proposed-seed2"


def test_wandb_run_is_labelled_quiet_and_logs_table_and_checkpoint(wandb_env, capfd, monkeypatch):
    monkeypatch.delenv("WANDB_SILENT")  # the logger itself must keep W&B quiet
    run_dir = wandb_env / "run"
    run_dir.mkdir()
    checkpoint = run_dir / "checkpoint.pt"
    checkpoint.write_bytes(b"weights")
    config = {"problem": {"name": "dcopf_14", "objective": "lp", "form": "standard"}, "method": {"name": "dc3"},
              "trainer": {"name": "fast"}, "seed": 1, "study": "smoke"}
    loggers = make_loggers(["csv", "wandb"], str(run_dir), config=config, log_checkpoint=True, **wandb_labels(config))
    loggers.log_epoch(0, {"phase": "train", "train/loss": 1.0})
    loggers.log_final({"test/gap_mean": 0.5})
    loggers.log_table("results", pd.DataFrame([{"problem": "dcopf_14", "method": "dc3", "test/gap_mean": 0.5}]))
    loggers.log_checkpoint(checkpoint, {"config_hash": "abc"})
    loggers.finish()
    printed = capfd.readouterr()
    assert "wandb:" not in printed.out + printed.err, "W&B printed to the console without logger.verbose=true"

    (wandb_file,) = (run_dir / "wandb").glob("offline-run-*/run-*.wandb")
    records = finished_records(wandb_file)
    (run,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert run.run_group == "smoke" and run.display_name == "dcopf_14-dc3-seed1"
    assert list(run.tags) == ["dcopf_14", "dc3", "lp", "standard", "trainer=fast"]
    tables = [h for r in records if r.WhichOneof("record_type") == "history" for h in [_items(r.history.item)] if "results/_type" in h]
    assert tables and tables[0]["results/_type"] == "table-file" and tables[0]["results/nrows"] == 1
    (table_file,) = wandb_file.parent.glob("files/media/table/results_*.table.json")
    table = json.loads(table_file.read_text())
    assert table["columns"] == ["problem", "method", "test/gap_mean"] and table["data"] == [["dcopf_14", "dc3", 0.5]]
    artifacts = [r.artifact for r in records if r.WhichOneof("record_type") == "artifact" and r.artifact.type == "model"]
    assert len(artifacts) == 1 and artifacts[0].name.startswith("model-")
    assert [m.path for m in artifacts[0].manifest.contents] == ["checkpoint.pt"]
    assert (run_dir / "tables" / "results.csv").is_file()  # the CSV logger keeps the same table


def test_wandb_checkpoint_artifact_is_off_by_default(wandb_env):
    run_dir = wandb_env / "run"
    logger = WandbLogger(run_dir, mode="offline")
    (run_dir / "checkpoint.pt").write_bytes(b"weights")
    logger.log_checkpoint(run_dir / "checkpoint.pt")
    logger.finish()
    (wandb_file,) = (run_dir / "wandb").glob("offline-run-*/run-*.wandb")
    records = finished_records(wandb_file)
    assert any(r.WhichOneof("record_type") == "exit" for r in records)
    assert not [r for r in records if r.WhichOneof("record_type") == "artifact" and r.artifact.type == "model"]


def test_an_evaluation_of_a_wandb_run_is_a_wandb_run_with_job_type_eval(wandb_env):
    """evaluate.py mirrors its record to W&B when the evaluated run logged there: job_type ``eval``, the record's
    status and identity in the summary; a run that logged to CSV only gets no W&B run."""
    from hardlinear.harness.reevaluate import mirror_to_wandb

    config = {"seed": 0, "problem": {"name": "dcopf_14"}, "method": {"name": "proposed"}, "study": "mine-eval",
              "logger": {"names": ["csv", "wandb"], "project": "hardlinear", "mode": None},
              "evaluated": {"run_dir": "somewhere", "identity": "abc"}}
    record = {"config": config, "status": "ok", "reason": "", "study": "mine-eval", "identity": "f00d",
              "row": {"test/gap_mean": 0.5, "method": "proposed"}}
    csv_only = wandb_env / "csv_only"
    mirror_to_wandb(csv_only, {**record, "config": {**config, "logger": {"names": ["csv"]}}})
    assert not (csv_only / "wandb").exists()

    out = wandb_env / "eval"
    mirror_to_wandb(out, record)
    (wandb_file,) = (out / "wandb").glob("offline-run-*/run-*.wandb")
    records = finished_records(wandb_file)
    (run,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert run.job_type == "eval"
    summary = {}
    for r in records:
        if r.WhichOneof("record_type") == "summary":
            summary.update(_items(r.summary.update))
    assert summary["status"] == "ok" and summary["identity"] == "f00d" and summary["test/gap_mean"] == 0.5
