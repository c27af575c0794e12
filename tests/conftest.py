"""Shared fixtures. Keep minimal: every test module sees this file."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from shared_data import PAPER_DATA, SKIP_PREFIX, missing_reason


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """One torch thread in every test: fastest on the 2-core CI machine, and no oversubscription beside solvers."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def paper_data_dir() -> Path:
    """The paper's published problem data (``../shared/reference/paper_data``), outside the repository;
    tests that use it skip where it is absent."""
    if not PAPER_DATA.is_dir():
        pytest.skip(missing_reason(PAPER_DATA))
    return PAPER_DATA


@pytest.fixture(scope="session")
def load_script():
    """Import a module of ``scripts/`` or ``scripts/maintainers/`` by name (the folders are not packages):
    ``load_script("provenance")``."""
    import importlib.util

    scripts = Path(__file__).resolve().parents[1] / "scripts"

    def load(name: str):
        found = [p for p in (scripts / f"{name}.py", scripts / "maintainers" / f"{name}.py") if p.exists()]
        if not found:
            raise FileNotFoundError(f"no {name}.py in {scripts} or {scripts / 'maintainers'}")
        spec = importlib.util.spec_from_file_location(f"scripts_{name}", found[0])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line counting the tests that skipped for want of ``../shared`` (a clone has none): the count a clone's
    run differs by from a run beside the data, and where the data was looked for."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if SKIP_PREFIX in _skip_reason(r)]
    if skipped:
        terminalreporter.write_line(f"{len(skipped)} skipped without ../shared (the paper's published data beside the "
                                    f"checkout, not in a clone; looked for {PAPER_DATA}); pytest -rs lists them")


def _skip_reason(report) -> str:
    longrepr = getattr(report, "longrepr", None)
    return str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr or "")
