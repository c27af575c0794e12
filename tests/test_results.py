"""The results store: identity, immutable records, and the derived table under concurrency, kills, a full disk
and corrupted or foreign files (0 records lost, 0 duplicated, 0 half-read)."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hardlinear.harness import results

ROOT = Path(__file__).resolve().parents[1]
CONFIG = {
    "problem": {"name": "dcopf_14", "uncertainty": 0.4}, "method": {"name": "proposed"}, "seed": 0,
    "trainer": {"lr": 0.001, "epochs": 5, "progress": True}, "results_dir": "results", "cache_dir": "data/cache",
    "logger": {"names": ["csv"]}, "progress": True, "rerun": False, "study": None, "experiment": "",
}


def record(i: int, study: str = "s", status: str = "ok", **config) -> dict:
    """A record of run ``i`` (its seed), as the harness writes one."""
    cfg = {**CONFIG, "seed": i, **config}
    ident = results.identity(cfg)
    row = {"problem": "dcopf_14", "objective": "lp", "form": "standard", "method": "proposed", "variant": "", "seed": i,
           "timestamp": f"2026-01-01T00:00:{i % 60:02d}Z", "config_hash": ident, "test/gap_mean": 0.5 + i, "test/gap_worst": 1.0}
    return {"identity": ident, "study": study, "status": status, "reason": "" if status == "ok" else "why", "row": row, "config": cfg}


# --- identity -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("change", [
    {"rerun": True}, {"progress": False}, {"trainer": {**CONFIG["trainer"], "progress": False}},
    {"cache_dir": "./data/cache"}, {"cache_dir": "/elsewhere"}, {"results_dir": "/tmp/x"}, {"study": "smoke"},
    {"experiment": "table_lp"}, {"logger": {"names": ["wandb"]}}, {"hydra": {"run": {"dir": "x"}}},
    {"trainer": {**CONFIG["trainer"], "lr": 1e-3}}, {"seed": 0.0},
])
def test_identity_ignores_keys_that_cannot_change_a_result(change):
    assert results.identity({**CONFIG, **change}) == results.identity(CONFIG)


@pytest.mark.parametrize("change", [
    {"seed": 1}, {"trainer": {**CONFIG["trainer"], "lr": 0.01}}, {"problem": {"name": "dcopf_14", "uncertainty": 0.3}},
    {"threads": 2}, {"trainer": {**CONFIG["trainer"], "epochs": 6}},
])
def test_identity_counts_every_other_key(change):
    assert results.identity({**CONFIG, **change}) != results.identity(CONFIG)


def test_a_dask_schedulers_address_is_not_identity_but_the_executor_and_lazy_rows_are():
    """A restarted dask cluster has a new address and gives the same solutions: resume must still find the runs."""
    base = {**CONFIG, "data": {"workers": 1, "executor": "dask", "scheduler": "tcp://10.0.0.1:8786", "lazy_rows": None}}
    assert results.identity({**base, "data": {**base["data"], "scheduler": "tcp://10.0.0.2:8786"}}) == results.identity(base)
    for change in ({"executor": "process", "scheduler": None}, {"lazy_rows": False}):
        assert results.identity({**base, "data": {**base["data"], **change}}) != results.identity(base)


def test_identity_normalises_numbers_and_carries_the_results_version(monkeypatch):
    one = {**CONFIG, "trainer": {**CONFIG["trainer"], "lr": 1}}
    assert results.identity(one) == results.identity({**CONFIG, "trainer": {**CONFIG["trainer"], "lr": 1.0}})
    assert results.identity_config(CONFIG)["results_version"] == results.RESULTS_VERSION
    before = results.identity(CONFIG)
    monkeypatch.setattr(results, "RESULTS_VERSION", results.RESULTS_VERSION + 1)
    assert results.identity(CONFIG) != before  # a fixed bug invalidates old records
    with pytest.raises(TypeError, match="OmegaConf.to_container"):
        results.identity(["not", "a", "dict"])


def test_study_defaults_to_the_experiment_then_default():
    assert results.study_of({"study": "mine", "experiment": "table_lp"}) == "mine"
    assert results.study_of({"study": None, "experiment": "table_lp"}) == "table_lp"
    assert results.study_of({"study": None, "experiment": ""}) == results.DEFAULT_STUDY == "default"


# --- writing and reading one record ---------------------------------------------------------------------
def test_a_record_is_written_once_and_read_back_verified(tmp_path):
    path = results.write_record(tmp_path / "run", record(3))
    assert path == tmp_path / "run" / "record.json"
    body = results.read_record(path)
    assert body["status"] == "ok" and body["results_version"] == results.RESULTS_VERSION and body["row"]["seed"] == 3
    with pytest.raises(FileExistsError, match="never rewritten"):
        results.write_record(tmp_path / "run", record(3))
    with pytest.raises(ValueError, match="needs a reason"):
        results.write_record(tmp_path / "other", {**record(4, status="failed"), "reason": " "})
    with pytest.raises(ValueError, match="status must be one of"):
        results.write_record(tmp_path / "other", record(4, status="great"))
    names = sorted(p.name for p in tmp_path.rglob("*"))  # no temp file left; the refused record kept beside
    assert [n for n in names if not n.startswith("record.conflict-")] == ["record.json", "run"]
    assert len([n for n in names if n.startswith("record.conflict-")]) == 1


def test_a_record_stores_its_run_dir_relative_to_its_results_root_and_is_read_where_it_now_lies(tmp_path):
    """A results folder is data that moves: the stored run_dir names no machine, and a moved folder still reads."""
    root = tmp_path / "res"
    path = results.write_record(root / "sweep" / "3-run", {**record(3, results_dir=str(root)), "row": {**record(3)["row"], "run_dir": str(root / "sweep" / "3-run")}})
    assert json.loads(path.read_text())["row"]["run_dir"] == "sweep/3-run"
    moved = tmp_path / "elsewhere"
    root.rename(moved)
    (row,) = results.load_records([moved]).to_dict("records")
    assert row["run_dir"] == str(moved / "sweep" / "3-run")


def test_non_finite_metrics_survive_the_round_trip(tmp_path):
    rec = record(0)
    rec["row"]["test/gap_mean"] = float("inf")
    rec["row"]["offline/t_star"] = float("nan")
    results.write_record(tmp_path / "a", rec)
    df = results.load_records(tmp_path)
    assert df["test/gap_mean"].iloc[0] == float("inf") and df["offline/t_star"].isna().iloc[0]


def test_resume_finds_done_statuses_per_study(tmp_path):
    for i, status in enumerate(("ok", "diverged", "not_applicable", "skipped", "failed")):
        results.write_record(tmp_path / f"r{i}", record(i, status=status))
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "record.json").write_bytes(b"\xff\xfe\x00 not a record")  # never stops a run
    with pytest.warns(UserWarning, match="garbage/record.json: not a readable record"):
        found = {i: results.find_recorded(tmp_path, record(i)["identity"], study="s") for i in range(5)}
    assert [i for i, f in found.items() if f is not None] == [0, 1, 2]  # skipped and failed are rerun
    with pytest.warns(UserWarning, match="not a readable record"):
        assert results.find_recorded(tmp_path, record(0)["identity"], study="other") is None


def test_filters_and_the_table_columns(tmp_path):
    results.write_record(tmp_path / "a", record(0, trainer={"lr": 1, "epochs": 5}))
    results.write_record(tmp_path / "b", record(1, study="t"))
    df = results.load_records(tmp_path)
    assert list(df.columns[: len(results.COLUMNS)]) == list(results.COLUMNS)
    assert {"study", "identity", "results_version", "reason", "record", "cfg.trainer.lr"} <= set(df.columns)
    assert len(results.load_records(tmp_path, where={"trainer.lr": "1.0"})) == 1
    assert len(results.load_records(tmp_path, study="t")) == 1
    with pytest.raises(KeyError, match="no column or config key 'trainer.lrr'"):
        results.load_records(tmp_path, where={"trainer.lrr": "1"})


# --- many writers at once -------------------------------------------------------------------------------
def _writer(root: str, worker: int, count: int) -> None:
    for i in range(count):
        results.write_record(Path(root) / f"w{worker}-{i}", record(worker * 1000 + i))
        # the same run recorded again by another "sweep" (two identical sweeps at once): one row in the table
        if i % 5 == 0:
            results.write_record(Path(root) / f"dup-w{worker}-{i}", record(worker * 1000 + i))


def test_concurrent_writers_lose_and_duplicate_nothing(tmp_path):
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, 25)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    df = results.load_records(tmp_path)
    want = sorted(w * 1000 + i for w in range(4) for i in range(25))
    assert sorted(df["seed"].astype(int)) == want  # 0 lost, 0 duplicated
    assert df["identity"].is_unique and df.attrs["unreadable"] == []
    assert len(results.load_records(tmp_path, all_runs=True)) == 100 + 4 * 5  # both copies are on disk
    a, b = tmp_path.parent / "a.csv", tmp_path.parent / "b.csv"
    results.aggregate([tmp_path], a)
    results.aggregate([tmp_path], b)
    assert a.read_bytes() == b.read_bytes()  # the derived table rebuilds identically


# --- kills and a full disk ------------------------------------------------------------------------------
KILLED_WRITER = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_results import record
from hardlinear.harness import results
root = Path({root!r})
i = 0
while True:
    results.write_record(root / f"run{{i}}", record(i, study="k", padding="x" * 20000))
    print(i, flush=True)
    i += 1
"""


def test_sigkill_at_random_moments_leaves_whole_records_or_none(tmp_path):
    rng = random.Random(17)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    confirmed: set[int] = set()
    for attempt in range(4):
        root = tmp_path / f"k{attempt}"
        proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER.format(tests=str(ROOT / "tests"), root=str(root))],
                                stdout=subprocess.PIPE, text=True, env=env)
        time.sleep(0.8 + rng.random() * 0.6)  # startup, then somewhere inside the writes
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        written = {int(line) for line in out.split()}
        df = results.load_records(root)
        assert df.attrs["unreadable"] == [], df.attrs["unreadable"]  # nothing half-written was read
        got = set(df["seed"].astype(int))
        assert written <= got and got <= written | {max(written, default=-1) + 1}  # 0 lost; at most the one in flight
        assert len(df) == len(got)  # 0 duplicated
        confirmed |= written
    assert confirmed, "the writer never finished a record before the kill"


FULL_DISK_WRITER = """
import resource, signal, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_results import record
from hardlinear.harness import results
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing the process
resource.setrlimit(resource.RLIMIT_FSIZE, (8000, 8000))
results.write_record(Path({root!r}) / "small", record(1))
try:
    results.write_record(Path({root!r}) / "big", record(2, padding="x" * 50000))
except OSError as err:
    print("refused", err.errno, flush=True)
"""


def test_a_full_disk_leaves_no_record_and_no_temp_file(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", FULL_DISK_WRITER.format(tests=str(ROOT / "tests"), root=str(tmp_path))],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("refused 27")  # EFBIG
    assert not (tmp_path / "big" / "record.json").exists()
    assert not [p for p in tmp_path.rglob("*.tmp")]
    df = results.load_records(tmp_path)
    assert df["seed"].tolist() == [1] and df.attrs["unreadable"] == []


# --- corrupted and foreign files ------------------------------------------------------------------------
def test_corrupted_and_foreign_files_are_reported_by_path_and_skipped(tmp_path):
    for i in range(5):
        results.write_record(tmp_path / f"r{i}", record(i))
    before = results.load_records(tmp_path)
    good = (tmp_path / "r0" / "record.json").read_bytes()
    bad = {
        "garbage": os.urandom(300),  # binary garbage
        "truncated": good[: len(good) // 2],  # a cut-short copy
        "edited": good.replace(b'"test/gap_mean": 0.5', b'"test/gap_mean": 0.1'),  # checksum no longer matches
        "foreign": json.dumps({"hello": "world"}).encode(),  # another tool's record.json
        "empty": b"",
    }
    assert bad["edited"] != good
    for name, data in bad.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "record.json").write_bytes(data)
    (tmp_path / "r1" / "notes.txt").write_bytes(os.urandom(100))  # a foreign file beside a record
    (tmp_path / "r2" / ".record.json.abc.tmp").write_bytes(good[:50])  # a temp file of a killed write
    with pytest.warns(UserWarning, match="skipping"):
        after = results.load_records(tmp_path)
    unreadable = after.attrs["unreadable"]
    assert sorted(Path(line.split(":")[0]).parent.name for line in unreadable) == sorted(bad)
    assert any("checksum mismatch" in line for line in unreadable)
    cols = [c for c in before.columns if c != "record"]
    assert after[cols].equals(before[cols])  # the good records, identically


def test_the_legacy_csv_is_read_safely_and_never_written(tmp_path):
    """The old store's failures (a comment first line, binary garbage, a torn last line) are reported and
    skipped; reading never rewrites the file."""
    header = ",".join(results.COLUMNS)
    row = ",".join("dcopf_14" if c == "problem" else ("ok" if c == "status" else "1") for c in results.COLUMNS)
    good = tmp_path / "a" / "runs.csv"
    good.parent.mkdir()
    good.write_bytes(f"{header}\n{row}\n".encode() + b"\xff\xfe\x00garbage\n" + row[: len(row) // 2].encode())
    with pytest.warns(UserWarning, match="malformed line"):
        df = results.load_records(good)
    assert len(df) == 1 and df["study"].iloc[0] == "a" and df["status"].iloc[0] == "ok"
    commented = tmp_path / "b" / "runs.csv"
    commented.parent.mkdir()
    commented.write_text(f"# sorted by hand\n{header}\n{row}\n")
    data = commented.read_bytes()
    with pytest.warns(UserWarning, match="not a results header"):
        assert results.load_records(commented).empty
    assert commented.read_bytes() == data
