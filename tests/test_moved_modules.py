"""The modules the layout changes moved import from their old paths, as the new module itself, with a
DeprecationWarning naming the new path, through one import hook (``hardlinear._moved``): no file in the tree only
re-exports another."""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from hardlinear._moved import MOVED, MOVED_NAMES


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_an_old_path_is_the_new_module_and_warns(monkeypatch, old, new):
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=rf"{old} moved to {new}: import it from there"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)


def test_the_issues_example_warns_where_the_user_imports_it():
    """Shown by default: the warning points at the importing line (here ``__main__``), not at importlib."""
    code = "from hardlinear.results import load_records; from hardlinear.harness.results import load_records as new; assert load_records is new"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "<string>:1: DeprecationWarning: hardlinear.results moved to hardlinear.harness.results" in out.stderr


OLD_NAMES = [(package, name) for package, (_, names) in sorted(MOVED_NAMES.items()) for name in names]


@pytest.mark.parametrize(("package", "name"), OLD_NAMES)
def test_a_name_of_an_old_module_that_became_a_package_comes_from_its_new_home(package, name):
    module = importlib.import_module(package)
    home = MOVED_NAMES[package][0]
    with pytest.warns(DeprecationWarning, match=rf"{package}.{name} moved to {home}.{name}"):
        got = getattr(module, name)
    assert got is getattr(importlib.import_module(home), name)
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018 - the attribute access is the test


def test_the_old_paths_need_no_file_of_their_own():
    """An old path resolves through the hook, not through a file left behind; and no module of the package is a
    re-export and nothing else (a docstring, imports, and one call or ``__all__``)."""
    src = Path(importlib.import_module("hardlinear").__file__).parent
    for old in MOVED:
        relative = Path(*old.split(".")[1:])
        assert not (src / relative).with_suffix(".py").exists() and not (src / relative / "__init__.py").exists(), old
    for path in src.rglob("*.py"):
        body = [node for node in ast.parse(path.read_text()).body
                if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
        imports = [node for node in body if isinstance(node, (ast.Import, ast.ImportFrom))]
        rest = [node for node in body if node not in imports]
        defines = any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for node in rest)
        if imports and len(rest) <= 1 and not defines and path.name != "__init__.py":
            pytest.fail(f"{path.relative_to(src)} only re-exports: {ast.unparse(body[-1])}")


def test_an_old_submodule_imported_as_a_name_of_its_package_warns():
    """``from hardlinear.layers import robust_lp`` (the old spelling) reaches the hook through the import system."""
    code = "import warnings; warnings.simplefilter('error'); from hardlinear.layers import robust_lp"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "hardlinear.layers.robust_lp moved to hardlinear.rules.robust_lp" in out.stderr
