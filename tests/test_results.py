"""The results store: parallel appends, resumable sweeps, torn lines, skips, aggregation."""

from __future__ import annotations

import csv
import multiprocessing as mp
import warnings

import pytest

from hardlinear import results
from hardlinear.results import COLUMNS, IDENTITY_COLUMNS, METRIC_COLUMNS


def _row(i: int, writer: str, **extra) -> dict:
    row = {
        "problem": "dcopf_14", "objective": "lp", "form": "standard", "method": "proposed", "variant": "",
        "seed": i, "experiment": "test", "timestamp": f"2025-01-01T00:00:{i % 60:02d}Z", "run_dir": f"runs/{writer}/{i}",
        "config_hash": f"{writer}-{i:04d}", "n": 123, "m_eq": 38, "m_ineq": 84, "k": 14, "status": "ok",
        "test/gap_mean": 0.1 * i + 1e-17, "test/ineq_viol_worst": 0.0,
    }
    row.update(extra)
    return row


def _writer(path: str, writer: str, count: int, barrier) -> None:
    barrier.wait()
    for i in range(count):
        extra = {"val/gap_mean": float(i)} if writer == "a" and i >= 50 else {}
        results.append_row(path, _row(i, writer, **extra))


def test_config_hash_stable_and_excludes_bookkeeping():
    cfg = {"problem": {"name": "dcopf_14", "uncertainty": 0.4}, "seed": 0, "results_csv": "a.csv", "logger": {"names": ["csv"]}}
    same = {"logger": {"names": ["wandb"]}, "seed": 0, "results_csv": "elsewhere.csv", "problem": {"uncertainty": 0.4, "name": "dcopf_14"}}
    h = results.config_hash(cfg)
    assert len(h) == 16 and int(h, 16) >= 0
    assert results.config_hash(same) == h
    assert results.config_hash({**cfg, "seed": 1}) != h
    assert results.config_hash({**cfg, "problem": {"name": "dcopf_14", "uncertainty": 0.3}}) != h
    assert results.config_hash(cfg, exclude=set()) != h
    with pytest.raises(TypeError, match="to_container"):
        results.config_hash(["not", "a", "dict"])


def test_parallel_appends_leave_well_formed_rows(tmp_path):
    path = str(tmp_path / "runs.csv")
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_writer, args=(path, w, 200, barrier)) for w in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert all(p.exitcode == 0 for p in procs)

    lines = (tmp_path / "runs.csv").read_text().split("\n")
    assert lines[-1] == ""  # every record ends with its newline
    header = next(csv.reader([lines[0]]))
    assert header[: len(COLUMNS)] == list(COLUMNS) and header[len(COLUMNS) :] == ["val/gap_mean"]
    assert sum(1 for line in lines if line.startswith("problem,")) == 1
    records = list(csv.reader(lines[1:-1]))
    assert len(records) == 400 and all(len(r) == len(header) for r in records)

    hashes = results.completed_hashes(path)
    assert hashes == {f"{w}-{i:04d}" for w in "ab" for i in range(200)}
    assert results.is_recorded(path, "a-0199") and not results.is_recorded(path, "c-0000")
    df = results.load_results(path)
    assert len(df) == 400
    a_late = df[df["config_hash"] == "a-0123"].iloc[0]
    assert a_late["val/gap_mean"] == 123.0
    assert df[df["config_hash"] == "b-0123"]["val/gap_mean"].isna().all()
    # full precision survives the round trip
    assert df[df["config_hash"] == "b-0007"]["test/gap_mean"].iloc[0] == 0.1 * 7 + 1e-17


def test_missing_keys_empty_extra_keys_kept(tmp_path):
    path = tmp_path / "r.csv"
    results.append_row(path, {"problem": "portfolio", "config_hash": "h1", "status": "ok", "mystery/key": 3.5, "note": "two\nlines"})
    text = path.read_text()
    assert text.count("\n") == 2  # the newline in a value never splits a record
    df = results.load_results(path)
    assert list(df.columns[: len(COLUMNS)]) == list(COLUMNS)
    assert df["mystery/key"].iloc[0] == 3.5 and df["note"].iloc[0] == "two lines"
    assert df["method"].iloc[0] == "" and df["test/gap_mean"].isna().all()


def test_torn_last_line_is_tolerated(tmp_path):
    path = tmp_path / "runs.csv"
    for i in range(3):
        results.append_row(path, _row(i, "a"))
    with open(path, "a") as f:
        f.write("dcopf_14,lp,standard,proposed,,9,,,")  # a crash of an older writer, mid-line
    with pytest.warns(UserWarning, match="malformed"):
        assert results.completed_hashes(path) == {"a-0000", "a-0001", "a-0002"}
    results.append_row(path, _row(3, "a"))  # starts on a fresh line, does not glue onto the torn one
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = results.load_results(path)
    assert sorted(df["config_hash"]) == ["a-0000", "a-0001", "a-0002", "a-0003"]
    assert len(caught) == 1


def test_record_skip_goes_to_sibling_file(tmp_path):
    path = tmp_path / "runs.csv"
    identity = {k: "" for k in IDENTITY_COLUMNS} | {"problem": "dcopf_118", "method": "optimizer", "variant": "gurobi", "seed": 0}
    results.record_skip(path, {**identity, "test/gap_mean": 0.0}, "gurobi licence refuses the model")
    assert not path.exists()  # never a metrics row
    skipped = results.skipped_path(path)
    assert skipped.name == "runs.skipped.csv"
    df = results.load_skipped(path)
    assert list(df.columns) == list(IDENTITY_COLUMNS) + ["reason"]
    assert df["reason"].iloc[0] == "gurobi licence refuses the model" and df["status"].iloc[0] == "skipped"
    assert not set(METRIC_COLUMNS) & set(df.columns)
    assert results.completed_hashes(path) == set()
    with pytest.raises(ValueError, match="reason"):
        results.record_skip(path, identity, " ")


def test_aggregate_keeps_newest_of_duplicates(tmp_path):
    a, b, out = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "agg" / "all.csv"
    results.append_row(a, _row(1, "x") | {"timestamp": "2025-01-01T00:00:00Z", "test/gap_mean": 1.0})
    results.append_row(a, _row(2, "x"))
    results.append_row(b, _row(1, "x") | {"timestamp": "2025-02-01T00:00:00Z", "test/gap_mean": 2.0})
    results.append_row(b, _row(5, "y") | {"extra/col": 7})
    df = results.aggregate([str(a), str(b)], str(out))
    assert len(df) == 3 and sorted(df["config_hash"]) == ["x-0001", "x-0002", "y-0005"]
    assert df.loc[df["config_hash"] == "x-0001", "test/gap_mean"].iloc[0] == 2.0
    assert "extra/col" in df.columns
    first = out.read_bytes()
    results.aggregate([str(b), str(a)], str(out))
    assert out.read_bytes() == first  # order of inputs does not matter
    with pytest.raises(FileNotFoundError):
        results.aggregate([str(tmp_path / "missing.csv")], str(out))
