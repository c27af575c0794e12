"""Reading a file that came with data (a results folder, a run directory) without blocking or ballooning.

Why: ``make report`` read ``epochs.csv`` and W&B's logs with ``open``: a FIFO of that name blocked it forever, a link
to ``/dev/zero`` filled the memory, and a link could point anywhere on the machine. :func:`read_regular` opens only
a regular file, never waits on one (``O_NONBLOCK``), reads at most ``limit`` bytes, and refuses a path whose links
lead outside the folder it must stay in.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class RefusedFile(OSError):
    """A path that is not read: not a regular file, too large, or leading outside its folder (an ``OSError``, so
    callers that skip an unreadable file skip it too)."""


def within(path: str | os.PathLike, folder: str | os.PathLike) -> bool:
    """Whether ``path``, its links resolved, lies inside ``folder`` (its links resolved too); False for a link loop."""
    try:
        Path(path).resolve().relative_to(Path(folder).resolve())
    except (ValueError, RuntimeError, OSError):
        return False
    return True


def read_regular(path: str | os.PathLike, limit: int, folder: str | os.PathLike | None = None) -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit`` of them: :class:`RefusedFile` beyond). ``folder``:
    the path, its links resolved, must lie inside it. A FIFO, a device, a directory, a dangling link or a loop are
    :class:`RefusedFile` (or the ``OSError`` of opening it), never a wait."""
    path = Path(path)
    if folder is not None and not within(path, folder):
        raise RefusedFile(f"{path}: leads outside {folder} (a link); not read")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RefusedFile(f"{path}: not a regular file (a FIFO, a device or a folder); not read")
        if info.st_size > limit:
            raise RefusedFile(f"{path}: {info.st_size:,} bytes, above the {limit:,} read from such a file; not read")
        data = read_at_most(fd, limit)
        if data is None:
            raise RefusedFile(f"{path}: grew past {limit:,} bytes while read; not read")
        return data
    finally:
        os.close(fd)


def read_at_most(fd: int, limit: int) -> bytes | None:
    """The bytes of the open file ``fd`` to its end, or None if it holds more than ``limit`` (read no further: a
    device such as ``/dev/zero`` or a file growing under the reader never fills memory)."""
    chunks, size = [], 0
    while size <= limit:
        chunk = os.read(fd, min(2**20, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return None if size > limit else b"".join(chunks)


def read_head(path: str | os.PathLike, limit: int, folder: str | os.PathLike | None = None) -> bytes:
    """The first ``limit`` bytes at most of the regular file ``path`` (a long log is searched in its head, not
    refused); the same refusals as :func:`read_regular` otherwise."""
    path = Path(path)
    if folder is not None and not within(path, folder):
        raise RefusedFile(f"{path}: leads outside {folder} (a link); not read")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RefusedFile(f"{path}: not a regular file (a FIFO, a device or a folder); not read")
        return os.read(fd, limit)
    finally:
        os.close(fd)
