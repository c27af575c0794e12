"""The PTDF matrix kept on disk, so that a large case's dispatch is built in seconds after its first build.

Why: the PTDF is a dense solve with one right-hand side per branch; at case9241 it took 17 minutes on one thread,
once per run, before any other work. Stored, it is read back bit for bit: the problem, hence its fingerprint and
every cache keyed by it, is the same as a fresh build's on this machine. The key holds everything the bits depend
on: the network's topology and susceptances, the reference bus, numpy's and scipy's versions and the size of the BLAS
thread pool (a pool of another size may sum in another order). The file carries a SHA-256 of its matrix; a file that
fails it is rebuilt, with a warning. One process builds a given matrix at a time (a lock beside the file).
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy
from filelock import FileLock

from hardlinear.runtime.atomic import atomic_write_bytes

log = logging.getLogger(__name__)
VERSION = 1
"""Part of the key: raise it when the PTDF's arithmetic changes."""


def _blas_threads() -> int:
    from threadpoolctl import threadpool_info

    return max((int(p.get("num_threads", 1)) for p in threadpool_info() if p.get("user_api") == "blas"), default=1)


def ptdf_key(*arrays: np.ndarray) -> str:
    """A hash of the arrays the PTDF is computed from, with the versions and the BLAS pool's size."""
    h = hashlib.sha256(f"v{VERSION} numpy {np.__version__} scipy {scipy.__version__} blas {_blas_threads()}".encode())
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:20]


def cached_ptdf(cache_dir: str | Path | None, key: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
    """``compute()``, read from ``cache_dir`` when this key was stored there before (None: always computed)."""
    if cache_dir is None:
        return compute()
    path = Path(cache_dir) / f"ptdf-{key}.npz"
    found = _load(path)
    if found is not None:
        return found
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        found = _load(path)  # another process may have stored it while this one waited
        if found is not None:
            return found
        ptdf = compute()
        buffer = io.BytesIO()
        np.savez(buffer, ptdf=ptdf, sha256=np.array(_digest(ptdf)))
        atomic_write_bytes(path, buffer.getvalue())
        log.info("stored the PTDF (%d x %d) in %s", *ptdf.shape, path)
        return ptdf


def _digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def _load(path: Path) -> np.ndarray | None:
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            ptdf, digest = f["ptdf"], str(f["sha256"])
    except (OSError, ValueError, KeyError) as err:
        log.warning("PTDF cache file %s is unreadable (%s); computing it again", path, err)
        return None
    if _digest(ptdf) != digest:
        log.warning("PTDF cache file %s fails its checksum; computing it again", path)
        return None
    return ptdf
