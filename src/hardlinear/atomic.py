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


def create_exclusive_bytes(path: str | os.PathLike, data: bytes, durable: bool = True) -> Path:
    """Create ``path`` with ``data`` atomically, and only if it does not exist; ``FileExistsError`` otherwise.

    Why not ``exists()`` then ``os.replace``: between the two another writer can create the file, and the replace
    would silently drop its content. Here the whole file is written to a temporary name, then hard-linked to
    ``path``: ``link`` fails if ``path`` exists, so of two writers exactly one wins and readers see a whole file.
    On a file system without hard links, ``O_CREAT | O_EXCL`` creates the file (exclusive still; a crash in the
    middle can then leave a partial file, which the readers' checksum rejects)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise
        except OSError:  # no hard links here (some FUSE / SMB mounts)
            with open(path, "xb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    if durable:
        fsync_dir(path.parent)
    return path


def atomic_write_bytes(path: str | os.PathLike, data: bytes, durable: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, rename); returns the path.

    On any error (a full disk: ``OSError(ENOSPC)`` or ``EFBIG``) the temporary file is removed and the error
    raised, and ``path`` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
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
