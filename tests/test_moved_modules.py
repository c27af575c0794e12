"""Issue 43, item 3: the modules the layout change moved import from their old paths, as the new module itself,
with a DeprecationWarning naming the new path."""

import importlib
import subprocess
import sys

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


@pytest.mark.parametrize("name", MOVED_NAMES["hardlinear.harness"][1])
def test_the_old_harness_modules_functions_come_from_the_runner(name):
    import hardlinear.harness
    from hardlinear.harness import runner

    with pytest.warns(DeprecationWarning, match=rf"hardlinear.harness.{name} moved to hardlinear.harness.runner.{name}"):
        got = getattr(hardlinear.harness, name)
    assert got is getattr(runner, name)
    with pytest.raises(AttributeError):
        hardlinear.harness.no_such_function  # noqa: B018 - the attribute access is the test
