"""The wings' dependency direction (DESIGN.md section 1) as import-linter contracts, run in the default suite:
a line of code that crosses a wing, or an import circle between sibling packages, fails here.

Each check runs import-linter in a subprocess: it configures logging and resolves the package through
``sys.path``, neither of which may leak into the other tests."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter", reason="import-linter is in the dev extra")

ROOT = Path(__file__).resolve().parents[1]
LINT = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))"


def lint(src: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run(
        [sys.executable, "-c", LINT, str(ROOT / "pyproject.toml")], cwd=cwd, env=env, capture_output=True, text=True
    )


def test_import_contracts_hold():
    result = lint(ROOT / "src", ROOT)
    assert result.returncode == 0, f"an import contract is broken:\n{result.stdout[-3000:]}"


def test_a_crossing_import_breaks_a_contract(tmp_path):
    """The contracts can fail: a copy of the package whose rules import a method is caught."""
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "hardlinear", src / "hardlinear", ignore=shutil.ignore_patterns("__pycache__"))
    with open(src / "hardlinear" / "rules" / "checks.py", "a") as f:
        f.write("\nimport hardlinear.methods.base  # crosses the wing\n")
    result = lint(src, tmp_path)
    assert result.returncode != 0
    assert "rules are offline" in result.stdout and "BROKEN" in result.stdout
