"""``threads`` sizes the native thread pools before numpy and torch load (``hardlinear.runtime.threads``), so a run's
figures do not depend on how many cores the machine shows.

Each case runs in a fresh interpreter (the pools are sized once, at import). The reference process may use one
core only, as on a 1-core machine or under ``taskset -c 0``; the process under test may use every core here.
Without the sizing, dcopf_118's equality projector (one LAPACK SVD) differs in its last bits between the two on
the 2-core CI machines (measured), and training amplifies that into different figures.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROJECTOR_HASH = """
import hashlib, os, sys
if sys.argv[1] == "one-core":
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
else:
    from hardlinear.runtime.threads import size_native_pools
    size_native_pools(1)
from hardlinear.layers.equality import EqualityProjector
from hardlinear.problems import build_problem
projector = EqualityProjector(build_problem("dcopf_118").family)
digest = hashlib.sha256(b"".join(t.numpy().tobytes() for t in projector.buffers()))
print(os.environ.get("OPENBLAS_NUM_THREADS"), digest.hexdigest())
"""


def _run(mode: str) -> tuple[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run(
        [sys.executable, "-c", PROJECTOR_HASH, mode], env=env, capture_output=True, text=True, check=True
    )
    pool, digest = out.stdout.split()
    return pool, digest


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs os.sched_setaffinity (Linux)")
def test_sized_pools_give_the_one_core_projector_on_every_core():
    _, one_core = _run("one-core")
    pool, all_cores = _run("sized")
    assert pool == "1"
    assert all_cores == one_core


def test_an_exported_value_is_kept_and_a_late_call_warns(monkeypatch):
    import hardlinear.runtime.threads as threads

    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    with pytest.warns(UserWarning, match="was imported before the thread pools were sized"):
        threads.size_native_pools(1)  # numpy and torch are loaded in the test process: too late to size anything
    assert os.environ["OMP_NUM_THREADS"] == "3" and "OPENBLAS_NUM_THREADS" not in os.environ
