"""Issue 29, item 9: a full disk ends a run with one clear line naming the path and the space needed, and leaves
nothing half-written (the logger's ``config.json`` included). The fast tests make the disk "full" where the bytes
meet it (``os.fsync`` raising ENOSPC, as NFS and tmpfs may report it); the slow one mounts a real 2 MB tmpfs
(root only)."""

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from hardlinear.harness import outputs, results
from hardlinear.harness.loggers import CSVLogger
from hardlinear.runtime.atomic import DiskFull, atomic_write_bytes, create_exclusive_bytes

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def full_disk(monkeypatch):
    def fsync(_fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", fsync)


@pytest.mark.parametrize("writer", [atomic_write_bytes, create_exclusive_bytes])
def test_an_atomic_write_on_a_full_disk_names_the_path_and_the_bytes_and_leaves_nothing(tmp_path, full_disk, writer):
    target = tmp_path / "record.json"
    with pytest.raises(DiskFull, match=rf"no space left on the device of {target}: writing it needs 3.0 KiB, .* free"):
        writer(target, b"x" * 3072)
    assert list(tmp_path.iterdir()) == []


def test_the_loggers_config_json_is_whole_or_absent(tmp_path, full_disk):
    logger = CSVLogger(tmp_path)
    with pytest.raises(DiskFull, match="config.json"):
        logger.log_config({"seed": 0, "big": "x" * 10_000})
    assert not (tmp_path / "config.json").exists()  # not a 0-byte file


def test_a_torn_epoch_row_is_cut_back(tmp_path, monkeypatch):
    logger = CSVLogger(tmp_path)
    logger.log_epoch(0, {"train/loss": 1.0})
    whole = (tmp_path / "epochs.csv").read_bytes()
    real_open = open

    class Torn:
        """A file whose write lands half a row, then the disk is full."""

        def __init__(self, path, mode, **kw):
            self.f = real_open(path, mode, **kw)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, text):
            self.f.write(text[: len(text) // 2])
            self.f.flush()
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self):
            pass

    import builtins

    monkeypatch.setattr(builtins, "open", lambda p, m="r", **kw: Torn(p, m, **kw) if m == "a" else real_open(p, m, **kw))
    with pytest.raises(DiskFull, match="epochs.csv"):
        logger.log_epoch(1, {"train/loss": 0.5})
    monkeypatch.undo()
    assert (tmp_path / "epochs.csv").read_bytes() == whole


def test_a_record_on_a_full_disk_is_not_half_written(tmp_path, full_disk):
    with pytest.raises(DiskFull, match="record.json"):
        results.write_record(tmp_path / "run", {"identity": "a", "study": "s", "status": "ok", "row": {}, "config": {}})
    assert not (tmp_path / "run" / "record.json").exists() and results.scan([tmp_path])[1] == []


def test_the_preflight_stops_a_run_with_one_line_before_hydra_writes(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(outputs, "free_bytes", lambda _p: 56 * 1024)
    cfg = OmegaConf.create({"hydra": {"run": {"dir": str(tmp_path / "run")}, "sweep": {"dir": str(tmp_path / "sweep")}}})
    for start in (outputs.OutputPreflight().on_run_start, outputs.OutputPreflight().on_multirun_start):
        with pytest.raises(SystemExit) as stop:
            start(config=cfg)
        assert stop.value.code == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "needs at least 1.0 MiB free, 56.0 KiB free" in err and str(tmp_path) in err
    assert list(tmp_path.iterdir()) == []


def test_a_run_dir_that_is_a_file_is_one_line(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("")
    out = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "problem=dcopf_14", f"hydra.run.dir={afile}"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=120,
    )
    assert out.returncode == 1 and out.stderr.strip() == f"error: hydra.run.dir='{afile}' is a file, not a folder; give a folder path"


def _tmpfs(path: Path, size: str) -> bool:
    path.mkdir()
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True).returncode == 0


@pytest.mark.slow
def test_a_real_full_disk_mid_run_is_one_line(tmp_path):
    """A real 2 MB tmpfs with 1.2 MB free: the run starts, then its 4.6 MB checkpoint does not fit."""
    disk = tmp_path / "disk"
    if not _tmpfs(disk, "2m"):
        pytest.skip("needs root and tmpfs to mount a small disk")
    try:
        (disk / "fill").write_bytes(b"\0" * 800 * 1024)
        out = subprocess.run(
            [sys.executable, str(ROOT / "run.py"), "problem=dcopf_14", "method=proposed", "trainer=fast", "trainer.epochs=1",
             "trainer.pretrain_epochs=0", "network.hidden=1024", "progress=false", "data.val_size=5", "data.test_size=5",
             "eval.throughput_batch=8", "eval.warmup=0", f"cache_dir={tmp_path / 'cache'}", f"results_dir={disk}",
             f"hydra.run.dir={disk / 'run'}"],
            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=600,
        )
        assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
        lines = [line for line in out.stderr.splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and "checkpoint.pt: writing it needs" in lines[0]
        assert not (disk / "run" / "checkpoint.pt").exists() and not list((disk / "run").glob(".*.tmp"))
        body = results.read_record(disk / "run" / "record.json")  # the run is recorded failed, with the reason
        assert body["status"] == "failed" and "DiskFull" in body["reason"]
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)
