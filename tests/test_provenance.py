"""Provenance: scripts/maintainers/provenance.py keeps the versions and machines of every snapshot, and a record's commit is
the one the process started on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_union_keeps_earlier_versions_and_adds_new_keys(load_script):
    union_seen = load_script("provenance").union_seen
    seen = union_seen({"highspy": ["1.15.1"], "torch": ["2.13.0+cpu"]}, {"highspy": "1.16.0", "torch": "2.13.0+cpu", "osqp": "1.1.3"})
    assert seen == {"highspy": ["1.15.1", "1.16.0"], "osqp": ["1.1.3"], "torch": ["2.13.0+cpu"]}
    assert union_seen(None, {"a": "1"}) == {"a": ["1"]}


def test_snapshot_reads_the_previous_file_including_the_old_format(tmp_path):
    """A provenance.json written before ``packages_seen`` existed contributes its ``packages``."""
    csv = tmp_path / "runs.csv"
    csv.write_text("git_sha,timestamp,device,train/time_s\nabc,2026-11-22T00:00:00Z,cpu:x86_64,5.0\n")
    out = tmp_path / "provenance.json"
    out.write_text(json.dumps({"packages": {"highspy": "0.0.1-old"}, "machine": {"cpu": "an older CPU"}}))
    command = [sys.executable, "scripts/maintainers/provenance.py", "--results", str(csv), "--out", str(out)]
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
    record = json.loads(out.read_text())
    assert record["packages_seen"]["highspy"] == ["0.0.1-old"] and record["machines_seen"]["cpu"] == ["an older CPU"]
    assert record["train_offline_and_data_seconds"] == 5.0
    before = out.read_bytes()
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
    assert out.read_bytes() == before  # regenerated from the same results: the same bytes (CI's check-artifacts)
    subprocess.run(command + ["--add-environment"], cwd=ROOT, check=True, capture_output=True)
    record = json.loads(out.read_text())
    assert "0.0.1-old" in record["packages_seen"]["highspy"] and len(record["packages_seen"]["highspy"]) == 2
    assert "an older CPU" in record["machines_seen"]["cpu"] and len(record["machines_seen"]["cpu"]) == 2


def test_the_commit_is_read_once_per_process(monkeypatch):
    """A commit landing during a sweep must not relabel the records of code imported before it."""
    from hardlinear.harness import origin

    monkeypatch.setattr(origin, "_PROCESS_SHA", [])
    monkeypatch.setattr(origin, "_read_git_sha", lambda: "abc123")
    assert origin.git_sha() == "abc123"
    monkeypatch.setattr(origin, "_read_git_sha", lambda: "a-later-commit")
    assert origin.git_sha() == "abc123"


def test_the_run_command_reads_the_commit_before_torch_loads():
    """``hardlinear run`` reads the commit before Hydra starts, without importing torch or numpy (the thread pools
    are sized later, before they load)."""
    probe = (
        "import sys\n"
        "from hardlinear.commands.run import main\n"
        "main(['no_such_key=1'])\n"
        "from hardlinear.harness import origin\n"
        "print(len(origin._PROCESS_SHA), 'torch' in sys.modules, 'numpy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "False", "False"]
