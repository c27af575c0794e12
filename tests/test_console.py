"""The console command (issue 44, item 3): ``hardlinear run|tables|figures|report|evaluate`` from an installed
package, the configs shipped inside it, a user's own config folder on the search path.

The entry point is the one ``pyproject.toml`` declares, loaded the way pip's launcher loads it; the package-data
globs must cover every config file (what a wheel ships); a run goes from a folder outside the checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="Python >= 3.11")

ROOT = Path(__file__).resolve().parents[1]


def _entry_point():
    """``hardlinear``'s function, as ``[project.scripts]`` names it."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    return EntryPoint(name="hardlinear", value=scripts["hardlinear"], group="console_scripts").load()


def _hardlinear(args: list[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """``hardlinear ARGS`` in a fresh interpreter (the launcher pip writes does no more than this)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT / "src"))
    program = "import sys; from hardlinear.commands import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", program, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_the_entry_point_lists_its_commands(capsys):
    main = _entry_point()
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("run", "tables", "figures", "report", "evaluate"):
        assert f"\n  {command} " in out
    assert main(["tabels"]) == 2 and "did you mean tables?" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["tables", "figures", "report", "evaluate"])
def test_each_command_has_its_help(command, capsys):
    with pytest.raises(SystemExit) as stop:
        _entry_point()([command, "--help"])
    assert stop.value.code == 0
    assert f"usage: hardlinear {command}" in capsys.readouterr().out


def test_the_configs_ship_inside_the_package():
    """Every file of ``conf/`` is reachable from the package and matched by a package-data glob (so a wheel holds it)."""
    from fnmatch import fnmatch

    from hardlinear.commands import CONF

    assert (CONF / "config.yaml").is_file() and CONF.samefile(ROOT / "conf")
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["hardlinear"]
    files = [p.relative_to(ROOT).as_posix() for p in (ROOT / "conf").rglob("*") if p.is_file()]
    assert files
    unshipped = [f for f in files if not any(fnmatch(f, g) and f.count("/") == g.count("/") for g in globs)]
    assert unshipped == [], f"config files a wheel would not ship: {unshipped}"


def test_hardlinear_run_help_lists_the_shipped_groups(tmp_path):
    done = _hardlinear(["run", "--help"], tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "problem: " in done.stdout and "dcopf_14" in done.stdout and "trainer: " in done.stdout


def test_a_user_config_folder_is_on_the_search_path(tmp_path):
    """``--config-dir DIR``: DIR's options are choices like the shipped ones (a misspelt one is still refused)."""
    user = tmp_path / "my_conf" / "problem"
    user.mkdir(parents=True)
    (user / "my_grid.yaml").write_text("defaults:\n  - dcopf_14\n  - _self_\n\nuncertainty: 0.25\n")
    done = _hardlinear(["run", "--config-dir", str(tmp_path / "my_conf"), "problem=my_grid", "--cfg", "job"], tmp_path, 120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "uncertainty: 0.25" in done.stdout and "name: dcopf_14" in done.stdout
    bad = _hardlinear(["run", "--config-dir", str(tmp_path / "my_conf"), "problem=my_gird", "--cfg", "job"], tmp_path, 120)
    assert bad.returncode == 1 and "did you mean my_grid?" in bad.stderr
    missing = _hardlinear(["run", "--config-dir", str(tmp_path / "nowhere"), "problem=my_grid"], tmp_path, 120)
    assert missing.returncode == 1 and "--config-dir" in missing.stderr and "no such folder" in missing.stderr


def test_hardlinear_run_trains_from_outside_the_checkout(tmp_path):
    """``hardlinear run ... trainer=fast`` from a folder that is not the checkout, with a problem from the user's
    config folder: the run's record lands under the given results_dir, and the next-steps lines name the commands."""
    user = tmp_path / "my_conf" / "problem"
    user.mkdir(parents=True)
    (user / "my_grid.yaml").write_text("defaults:\n  - dcopf_14\n  - _self_\n\nuncertainty: 0.25\n")
    args = [
        "run", "--config-dir", str(tmp_path / "my_conf"), "problem=my_grid", "trainer=fast", "trainer.epochs=1",
        "trainer.pretrain_epochs=1", "network.hidden=32", "progress=false", "data.val_size=8", "data.test_size=8",
        "eval.throughput_batch=16", "eval.warmup=0", "eval.time_instances=2", f"cache_dir={tmp_path / 'cache'}",
        f"results_dir={tmp_path / 'results'}",
    ]
    done = _hardlinear(args, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    records = list((tmp_path / "results").rglob("record.json"))
    assert len(records) == 1
    record = json.loads(records[0].read_text())
    assert record["status"] == "ok" and record["config"]["problem"]["uncertainty"] == 0.25
    assert (records[0].parent / "run.log").is_file() and (records[0].parent / "checkpoint.pt").is_file()
    assert "hardlinear tables --study default" in done.stdout and "make tables" not in done.stdout


def test_the_wheel_ships_the_configs_and_the_command(tmp_path):
    """A wheel built from a copy of the checkout holds every config under hardlinear/conf and the console script."""
    import shutil
    import zipfile

    pytest.importorskip("build", reason="build is in the dev extra")
    pytest.importorskip("setuptools")
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, tree / name)
    shutil.copytree(ROOT / "conf", tree / "conf")
    shutil.copytree(ROOT / "src", tree / "src", symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--skip-dependency-check", "--outdir", str(tmp_path / "dist"), str(tree)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    wheel = zipfile.ZipFile(next((tmp_path / "dist").glob("*.whl")))
    names = set(wheel.namelist())
    configs = {f"hardlinear/conf/{p.relative_to(ROOT / 'conf').as_posix()}" for p in (ROOT / "conf").rglob("*.yaml")}
    assert configs and configs <= names, sorted(configs - names)[:5]
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "hardlinear = hardlinear.commands:main" in wheel.read(entry_points).decode()
