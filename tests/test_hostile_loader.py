"""Issue 29, items 4 and 8: whatever lies under a results root, the loader reports it by path with the reason and
goes on; nothing there stops ``make tables``, ``make aggregate`` or a run's resume check. Item 5: study names
are one path component, checked where they enter."""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from hardlinear.harness import results
from hardlinear.harness.schemas import ConfigError, validate_config

ROOT = Path(__file__).resolve().parents[1]


def _good(root: Path, name: str = "good") -> Path:
    return results.write_record(root / name, {
        "identity": "abc", "study": "s", "status": "ok", "config": {"seed": 0},
        "row": {"problem": "p", "method": "m", "timestamp": "2026-01-01T00:00:00Z", "test/gap_mean": 1.0},
    })


def _signed(body: dict) -> str:
    """A record with a valid checksum (as a hostile writer can compute it) around ``body``."""
    body = {"schema": results.RECORD_SCHEMA, "results_version": results.RESULTS_VERSION, "reason": "", "provenance": {}, **body}
    body["checksum"] = results._checksum(body)
    return json.dumps(body)


def _hostile_root(root: Path) -> dict[str, str]:
    """Every kind of bad entry the issue names, each in its own folder; returns folder -> reason expected."""
    expect = {}
    (root / "deep").mkdir(parents=True)
    (root / "deep" / "record.json").write_text("[" * 100_000 + "]" * 100_000)
    expect["deep"] = "nested too deep"
    base = {"identity": "x", "study": "s", "status": "ok", "row": {}, "config": {}}
    for name, change, why in (
        ("config_str", {"config": "oops"}, "config is str, not dict"),
        ("row_list", {"row": [1, 2]}, "row is list, not dict"),
        ("study_list", {"study": ["a"]}, "study is list, not str"),
        ("study_escape", {"study": "../../escape"}, "must be one folder name"),
        ("deep_valid_checksum", {"config": json.loads("{\"a\":" * 200 + "1" + "}" * 200)}, "nests deeper than"),
    ):
        (root / name).mkdir()
        (root / name / "record.json").write_text(_signed({**base, **change}))
        expect[name] = why
    (root / "loop").mkdir()
    os.symlink(root / "loop" / "record.json", root / "loop" / "record.json")
    expect["loop"] = "cannot be opened"
    (root / "dangling").mkdir()
    os.symlink(root / "nowhere", root / "dangling" / "record.json")
    expect["dangling"] = "cannot be opened"
    (root / "dir" / "record.json").mkdir(parents=True)
    expect["dir"] = "is a directory"
    (root / "fifo").mkdir()
    os.mkfifo(root / "fifo" / "record.json")
    expect["fifo"] = "is a FIFO"
    (root / "zero").mkdir()
    os.symlink("/dev/zero", root / "zero" / "record.json")
    expect["zero"] = "not a regular file"
    (root / "huge").mkdir()
    with open(root / "huge" / "record.json", "wb") as f:
        f.truncate(results.MAX_RECORD_BYTES + 10)  # sparse: no disk used
    expect["huge"] = "larger than"
    return expect


def test_every_hostile_entry_is_reported_by_path_and_the_good_record_still_loads(tmp_path):
    root = tmp_path / "results"
    expect = _hostile_root(root)
    good = _good(root)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = results.load_records([root])
    assert list(df["record"]) == [str(good)]
    bad = df.attrs["unreadable"]
    for folder, why in expect.items():
        lines = [line for line in bad if f"{root / folder}{os.sep}record.json" in line]
        assert len(lines) == 1 and why in lines[0], f"{folder}: expected one line with {why!r}; got {lines}"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any directory")
def test_an_unreadable_directory_is_reported(tmp_path):
    root = tmp_path / "results"
    hidden = _good(root, "hidden").parent
    _good(root, "seen")
    hidden.chmod(0)
    try:
        df = results.load_records([root], quiet=True)
    finally:
        hidden.chmod(0o755)
    assert len(df) == 1 and any(str(hidden) in line and "cannot be listed" in line for line in df.attrs["unreadable"])


def test_a_directory_that_cannot_be_listed_is_reported_even_as_root(tmp_path, monkeypatch):
    """Root reads every directory, so the refusal is simulated where the walk meets it (``os.scandir``)."""
    root = tmp_path / "results"
    hidden = _good(root, "hidden").parent
    _good(root, "seen")
    real = os.scandir

    def scandir(path="."):
        if Path(path) == hidden:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    df = results.load_records([root], quiet=True)
    assert len(df) == 1 and any(str(hidden) in line and "cannot be listed" in line for line in df.attrs["unreadable"])


def test_a_run_resume_check_survives_a_hostile_results_root(tmp_path):
    root = tmp_path / "results"
    _hostile_root(root)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert results.find_recorded(root, "no-such-identity") is None
    assert any("nested too deep" in str(w.message) for w in caught)


@pytest.mark.parametrize("script", ["make_tables", "aggregate", "make_report"])
def test_make_tables_and_aggregate_go_on_past_a_hostile_root(tmp_path, script):
    root = tmp_path / "results"
    _hostile_root(root)
    _good(root)
    args = ["--out", str(tmp_path / ("agg.csv" if script == "aggregate" else "t"))]
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / f"{script}.py"), "--results", str(root), *args],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=120,
    )
    assert "RecursionError" not in out.stderr and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert "nested too deep" in out.stderr
    if script == "aggregate":
        assert out.returncode == 0 and out.stdout.startswith("1 runs")
    elif script == "make_report":  # the good run's study gets its page
        assert out.returncode == 0 and (tmp_path / "t" / "s" / "index.html").exists()
    else:  # study "s" has none of the paper's problems: said, not an error of the loader
        assert "study s:" in out.stdout


# --- item 5: study names ---------------------------------------------------------------------------------
BAD_STUDIES = ["/abs/path", "../../x", "a/b", "..", ".", "", "a\\b"]


@pytest.mark.parametrize("name", BAD_STUDIES)
def test_a_study_that_is_not_one_folder_name_is_refused_by_config_validation(name):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["problem=dcopf_14"])
    cfg = OmegaConf.merge(cfg, {"study": name})
    with pytest.raises(ConfigError, match=r"study=.* (must be one folder name|is empty)"):
        validate_config(cfg)


@pytest.mark.parametrize("script", ["make_tables", "make_figures", "make_report"])
@pytest.mark.parametrize("name", ["../../escape", "/tmp/abs-escape-hardlinear"])
def test_make_tables_and_figures_refuse_an_escaping_study_and_write_nothing(tmp_path, script, name):
    root = tmp_path / "results"
    _good(root)
    out_dir = tmp_path / "deep" / "er" / "out"
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / f"{script}.py"), "--results", str(root), "--study", name, "--out", str(out_dir)],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=120,
    )
    assert out.returncode == 1 and "--study" in out.stderr and "must be one folder name" in out.stderr
    assert not (tmp_path / "deep").exists() and not Path("/tmp/abs-escape-hardlinear").exists()


def test_a_legacy_csv_row_with_an_escaping_study_is_skipped_with_a_warning(tmp_path):
    csv = tmp_path / "paper" / "runs.csv"
    csv.parent.mkdir()
    csv.write_text("problem,method,status,study\np,m,ok,../../x\np,m,ok,fine\n")
    with pytest.warns(UserWarning, match="must be one folder name"):
        rows = results.read_legacy_csv(csv)
    assert [r["study"] for r in rows] == ["fine"]
