"""Issue 60 item 7: the tests that need ``../shared`` (the paper's published data beside the checkout; a clone has
none) skip saying so, each naming the path it looked for, and the run's closing summary counts them. Run here as a
clone sees it (``HARDLINEAR_SHARED_DIR`` at an empty folder), on two tests that use the suite's two ways of reading
the data (the ``paper_data_dir`` fixture and a ``skipif`` on ``PAPER_DATA``) with the suite's ``conftest``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PROBE = '''
import pytest
from shared_data import PAPER_DATA, missing_reason

def test_by_fixture(paper_data_dir):
    assert paper_data_dir.is_dir()

@pytest.mark.skipif(not PAPER_DATA.exists(), reason=missing_reason(PAPER_DATA))
@pytest.mark.parametrize("name", ["dcopf_14", "portfolio"])
def test_by_mark(name):
    assert (PAPER_DATA / f"{name}.npz").exists()

def test_without_data():
    pass
'''


def test_a_clone_is_told_which_tests_skip_without_shared_and_why(tmp_path):
    (tmp_path / "test_probe.py").write_text(PROBE)
    shared = tmp_path / "no" / "shared"
    env = {**os.environ, "HARDLINEAR_SHARED_DIR": str(shared), "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "conftest", "-p", "no:cacheprovider",
                           "test_probe.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-2000:]
    assert "1 passed, 3 skipped" in out.splitlines()[-1]
    looked = shared / "reference" / "paper_data"
    assert f"3 skipped without ../shared (the paper's published data beside the checkout, not in a clone; looked for {looked})" in out
    reasons = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert len(reasons) == 2 and all(f"needs ../shared/reference/paper_data (the paper's published data, kept beside the "
                                     f"checkout, not in a clone): absent at {looked}" in line for line in reasons), reasons
