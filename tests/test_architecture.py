"""The wings' dependency direction (DESIGN.md section 1) as import-linter contracts, run in the default suite:
a line of code that crosses a wing, or an import circle between sibling packages, fails here."""

import os
from pathlib import Path

import pytest

importlinter_cli = pytest.importorskip("importlinter.cli", reason="import-linter is in the dev extra")

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    exit_code = importlinter_cli.lint_imports(
        config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True
    )
    assert exit_code == 0, "an import contract is broken: run `lint-imports` for the chain that crosses it"


def test_a_crossing_import_breaks_a_contract(tmp_path, monkeypatch):
    """The contracts can fail: a copy of the package whose rules import a method is caught."""
    import shutil

    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "hardlinear", src / "hardlinear", ignore=shutil.ignore_patterns("__pycache__"))
    with open(src / "hardlinear" / "rules" / "checks.py", "a") as f:
        f.write("\nimport hardlinear.methods.base  # crosses the wing\n")
    monkeypatch.syspath_prepend(str(src))
    monkeypatch.chdir(tmp_path)
    for name in [m for m in list(os.sys.modules) if m == "hardlinear" or m.startswith("hardlinear.")]:
        monkeypatch.delitem(os.sys.modules, name)
    exit_code = importlinter_cli.lint_imports(
        config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True
    )
    assert exit_code != 0
