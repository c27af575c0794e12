"""scripts/provenance.py: the versions and machines of every snapshot survive the next one."""

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
    subprocess.run([sys.executable, "scripts/provenance.py", "--results", str(csv), "--out", str(out)], cwd=ROOT, check=True, capture_output=True)
    record = json.loads(out.read_text())
    assert "0.0.1-old" in record["packages_seen"]["highspy"] and record["packages"]["highspy"] in record["packages_seen"]["highspy"]
    assert record["packages"]["highspy"] != "0.0.1-old"
    assert "an older CPU" in record["machines_seen"]["cpu"]
    assert record["train_offline_and_data_seconds"] == 5.0
