"""Atomic file writes: readers see the old file or the whole new one, never a torn write.

One implementation for every writer that must survive a crash, a kill or a full disk (dataset and rule caches,
run records, checkpoints, derived tables): a temporary file in the target's folder, ``fsync``, ``os.replace``.
``durable=True`` also fsyncs the folder, so the rename itself survives a power cut (records, checkpoints).
Standard library only, so that the results store can use it without importing numpy or torch.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_UMASK: int | None = None


def file_mode() -> int:
    """The mode a plain ``open(path, "w")`` would give a new file: ``0o666`` less the process's umask.

    Why: ``mkstemp`` creates its file with mode 0600, so every record, metric file and checkpoint was private
    to its writer, and colleagues on a shared cluster file system could not read them. Read once per process
    (``os.umask`` can only be read by setting it)."""
    global _UMASK
    if _UMASK is None:
        _UMASK = os.umask(0o022)
        os.umask(_UMASK)
    return 0o666 & ~_UMASK


def fsync_dir(folder: str | os.PathLike) -> None:
    """Make a rename in ``folder`` durable (POSIX); a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike, data: bytes, durable: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, rename); returns the path. The file gets the
    permissions the umask gives (``file_mode``), as a plain write would.

    On any error (a full disk: ``OSError(ENOSPC)`` or ``EFBIG``) the temporary file is removed and the error
    raised, and ``path`` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)
    return path
