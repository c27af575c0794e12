"""Shared fixtures. Keep minimal: every test module sees this file."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch


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
    path = Path(__file__).resolve().parents[2] / "shared" / "reference" / "paper_data"
    if not path.is_dir():
        pytest.skip(f"the paper's data is not available here (looked for {path})")
    return path


@pytest.fixture(scope="session")
def load_script():
    """Import a module of ``scripts/`` by name (the folder is not a package): ``load_script("provenance")``."""
    import importlib.util

    scripts = Path(__file__).resolve().parents[1] / "scripts"

    def load(name: str):
        spec = importlib.util.spec_from_file_location(f"scripts_{name}", scripts / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
