"""Where the tests find the data that lives beside the checkout, not in it (``../shared``), and the one skip reason
they give where it is absent: a clone has no ``../shared``, so these tests skip there, each saying which path it
looked for, and the run's closing summary counts them (``conftest.pytest_terminal_summary``).

``HARDLINEAR_SHARED_DIR`` names another folder in place of ``../shared`` (the suite's own test of the summary points
it at an empty one).
"""

from __future__ import annotations

import os
from pathlib import Path

SHARED_DIR = Path(os.environ.get("HARDLINEAR_SHARED_DIR") or Path(__file__).resolve().parents[2] / "shared")
PAPER_DATA = SHARED_DIR / "reference" / "paper_data"
SKIP_PREFIX = "needs ../shared"
"""Every skip for absent shared data starts so: the closing summary counts the skips by it."""


def missing_reason(path: Path) -> str:
    """The skip reason of a test that reads ``path`` (``PAPER_DATA``) under ``../shared`` and finds it absent."""
    return f"{SKIP_PREFIX}/{path.relative_to(SHARED_DIR).as_posix()} (the paper's published data, kept beside the " \
           f"checkout, not in a clone): absent at {path}"
