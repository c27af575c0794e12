"""Shared fixtures. Keep minimal: every test module sees this file."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def paper_data_dir() -> Path:
    """The paper's published problem data (``../shared/reference/paper_data``), outside the repository;
    tests that use it skip where it is absent."""
    path = Path(__file__).resolve().parents[2] / "shared" / "reference" / "paper_data"
    if not path.is_dir():
        pytest.skip(f"the paper's data is not available here (looked for {path})")
    return path
