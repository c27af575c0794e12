"""Atomic file writes: readers see the old file or the whole new one, never a torn write.

One implementation for every writer that must survive a crash, a kill or a full disk (dataset and rule caches,
run records, checkpoints, derived tables): a temporary file in the target's folder, ``fsync``, ``os.replace``.
``durable=True`` also fsyncs the folder, so the rename itself survives a power cut (records, checkpoints).
Standard library only, so that the results store can use it without importing numpy or torch.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

FULL_ERRNOS = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG)


class DiskFull(OSError):
    """A write that did not fit: the message names the path, the bytes it needed and the bytes free."""


def free_bytes(path: str | os.PathLike) -> int | None:
    """Bytes free to this user on the file system of ``path`` (or of its nearest existing folder); None if unknown."""
    folder = Path(path)
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def _size(n: int | None) -> str:
    if n is None:
        return "an unknown amount"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def disk_full(err: OSError, path: str | os.PathLike, needed: int | None) -> OSError:
    """``err`` as a :class:`DiskFull` with one line naming ``path``, the space ``needed`` and the space free, when it
    is a full disk (ENOSPC, EDQUOT, EFBIG); ``err`` itself otherwise."""
    if isinstance(err, DiskFull) or err.errno not in FULL_ERRNOS:
        return err
    message = (
        f"no space left on the device of {path}: writing it needs {_size(needed)}, {_size(free_bytes(path))} free; "
        "nothing was half-written. Free some space, or point the output elsewhere (hydra.run.dir=..., cache_dir=...)"
    )
    return DiskFull(err.errno, message)


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


def _write_temporary(path: Path, data: bytes) -> str:
    """``data`` in a fresh temporary file beside ``path``, fsynced, with the umask's mode: what both writers
    below publish (by a rename, or by a hard link). A full disk comes out as :class:`DiskFull`."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:
        raise disk_full(err, path, len(data)) from None
    try:
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException as err:
        os.unlink(tmp)
        if isinstance(err, OSError):
            raise disk_full(err, path, len(data)) from None
        raise
    return tmp


def create_exclusive_bytes(path: str | os.PathLike, data: bytes, durable: bool = True) -> Path:
    """Create ``path`` with ``data`` atomically, and only if it does not exist; ``FileExistsError`` otherwise.

    Why not ``exists()`` then ``os.replace``: between the two another writer can create the file, and the replace
    would silently drop its content. Here the whole file is written to a temporary name, then hard-linked to
    ``path``: ``link`` fails if ``path`` exists, so of two writers exactly one wins and readers see a whole file.
    On a file system without hard links, ``O_CREAT | O_EXCL`` creates the file (exclusive still; a crash in the
    middle can then leave a partial file, which the readers' checksum rejects)."""
    path = Path(path)
    tmp = _write_temporary(path, data)
    try:
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise
        except OSError as err:  # no hard links here (some FUSE / SMB mounts)
            if err.errno in FULL_ERRNOS:
                raise
            _create_exclusive_in_place(path, data)
    except FileExistsError:
        raise
    except OSError as err:
        raise disk_full(err, path, len(data)) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    if durable:
        fsync_dir(path.parent)
    return path


def _create_exclusive_in_place(path: Path, data: bytes) -> None:
    """``O_EXCL`` creation; a failed write removes the partial file it made."""
    with open(path, "xb") as f:
        try:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        except BaseException:
            os.unlink(path)
            raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes, durable: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, rename); returns the path. The file gets the
    permissions the umask gives (``file_mode``), as a plain write would.

    On any error (a full disk: ``OSError(ENOSPC)`` or ``EFBIG``) the temporary file is removed and the error
    raised, and ``path`` is left as it was."""
    path = Path(path)
    tmp = _write_temporary(path, data)
    try:
        os.replace(tmp, path)
    except OSError as err:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise disk_full(err, path, len(data)) from None
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)
    return path
