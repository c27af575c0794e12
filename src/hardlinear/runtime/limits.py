"""What this process may still use: memory and threads, as the kernel will count them.

Why: the free memory of the machine (``MemAvailable``) is not what a process may use. A container's memory cgroup,
``ulimit -v`` (``RLIMIT_AS``) or ``RLIMIT_DATA`` stop it earlier, and then a network or a batch that "fits" is
killed by the OOM killer or fails inside the allocator. Likewise a ``threads=1024`` that the cgroup's ``pids.max``
or ``RLIMIT_NPROC`` caps at 250 made OpenBLAS fail to start its pool (a segfault or a hang) before any check ran.
Both read Linux's files; elsewhere they answer None (no check).
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
UNLIMITED = 2**62
"""cgroup v1 writes "no limit" as a huge number (9223372036854771712): anything above this is no limit."""


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if text in ("max", ""):
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return None if value >= UNLIMITED else value


def _cgroup_folders(controller: str) -> list[Path]:
    """The folders of this process's cgroup for ``controller`` and their parents (v2 and v1 layouts; the first
    of a v1 namespace is the controller's root, which a container sees as its own)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
    out: list[Path] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, where = parts
        if controllers == "":  # cgroup v2
            base = CGROUP_ROOT
        elif controller in controllers.split(","):
            base = CGROUP_ROOT / controllers
        else:
            continue
        folder = base / where.lstrip("/")
        while True:
            out.append(folder)
            if folder == base or folder.parent == folder:
                break
            folder = folder.parent
    return out


def _cgroup_room(controller: str, limit_files: tuple[str, ...], usage_files: tuple[str, ...]) -> int | None:
    """The smallest ``limit - usage`` over this process's cgroup and its parents, or None when none limits."""
    rooms = []
    for folder in _cgroup_folders(controller):
        for limit_name, usage_name in zip(limit_files, usage_files):
            limit = _read_int(folder / limit_name)
            if limit is None:
                continue
            usage = _read_int(folder / usage_name) or 0
            rooms.append(max(limit - usage, 0))
    return min(rooms) if rooms else None


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _rlimit_room(which: int, used_field: str) -> int | None:
    soft, _ = resource.getrlimit(which)
    if soft == resource.RLIM_INFINITY:
        return None
    used = _status_kib(used_field) or 0
    return max(soft - used, 0)


def memory_room() -> tuple[int | None, str]:
    """``(bytes, what limits them)``: the memory this process may still allocate, the smallest of the machine's
    ``MemAvailable``, its memory cgroup's limit less its usage, and ``RLIMIT_AS`` / ``RLIMIT_DATA`` less what the
    process has mapped; ``(None, "")`` where none can be read."""
    candidates: list[tuple[int, str]] = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                candidates.append((int(line.split()[1]) * 1024, "free on the machine"))
    except (OSError, ValueError, IndexError):
        pass
    room = _cgroup_room("memory", ("memory.max", "memory.limit_in_bytes"), ("memory.current", "memory.usage_in_bytes"))
    if room is not None:
        candidates.append((room, "left under the memory cgroup's limit"))
    for which, field, name in ((resource.RLIMIT_AS, "VmSize", "RLIMIT_AS (ulimit -v)"),
                               (resource.RLIMIT_DATA, "VmData", "RLIMIT_DATA (ulimit -d)")):
        room = _rlimit_room(which, field)
        if room is not None:
            candidates.append((room, f"left under {name}"))
    if not candidates:
        return None, ""
    return min(candidates)


def _user_tasks(uid: int) -> int:
    """Threads of every process of ``uid`` (what ``RLIMIT_NPROC`` counts)."""
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        try:
            if int(fields.get("Uid", "-1").split()[0]) == uid:
                count += int(fields.get("Threads", "1").strip())
        except ValueError:
            continue
    return count


def thread_room() -> tuple[int | None, str]:
    """``(threads, what limits them)``: how many more threads this process may start, the smaller of its pids
    cgroup's ``pids.max`` less ``pids.current`` and ``RLIMIT_NPROC`` less the user's threads (not for root, whom
    the kernel does not hold to it); ``(None, "")`` where nothing limits."""
    candidates: list[tuple[int, str]] = []
    room = _cgroup_room("pids", ("pids.max",), ("pids.current",))
    if room is not None:
        candidates.append((room, "left under the pids cgroup's pids.max"))
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != resource.RLIM_INFINITY and os.geteuid() != 0:
        candidates.append((max(soft - _user_tasks(os.geteuid()), 0), "left under RLIMIT_NPROC (ulimit -u)"))
    if not candidates:
        return None, ""
    return min(candidates)
