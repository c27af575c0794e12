"""Native thread pools sized from the ``threads`` setting before numpy and torch load, so figures do not depend
on the number of cores.

numpy's OpenBLAS and torch's OpenMP size their pools when they are imported, from ``OPENBLAS_NUM_THREADS`` /
``OMP_NUM_THREADS`` or else the cores the process may use; ``torch.set_num_threads`` does not resize numpy's.
LAPACK's SVD rounds differently on 2 threads than on 1: the equality projector's basis (one SVD of ``G``)
differed in its last bits, and training amplifies that. dcopf_118 LP, proposed, seed 1 gave 1.109 % (worst 4.59)
pinned to one core and 1.070 % (worst 3.13) on both cores of the same machine before this module existed.
Sizing every pool from ``threads`` first makes a run's figures a function of its configuration (and the CPU's
instruction set), not of how many cores are visible.
"""

from __future__ import annotations

import os
import sys
import warnings

POOL_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
MAX_THREADS = 1024
"""Largest ``threads`` that sizes the pools (``harness.schemas.tables.MAX_THREADS``): OpenBLAS sized for 100000
threads failed to allocate its buffers and the process segfaulted before the config validation could refuse it."""


def size_native_pools(threads: int) -> None:
    """Set ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and ``MKL_NUM_THREADS`` to ``threads`` where the
    environment does not set them.

    Effective only before numpy and torch are imported: called first after that, it warns that the pools kept the
    size the import gave them. A value the user exported is kept (a cluster's job script may set it on purpose).
    Later jobs of a sweep find every variable set (by the first job) and pass silently.
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
        return  # the config validation reports a bad `threads` with the other config errors
    if threads_beyond_room(threads):
        return  # pools of that size cannot start here (a segfault or a hang in OpenBLAS): validation says so
    if "numpy" in sys.modules or "torch" in sys.modules:
        if not all(name in os.environ for name in POOL_VARIABLES):
            warnings.warn(
                f"numpy or torch was imported before the thread pools were sized from threads={threads}: figures "
                "may differ in the last bits from a run started with OMP_NUM_THREADS set",
                stacklevel=2,
            )
        return
    for name in POOL_VARIABLES:
        os.environ.setdefault(name, str(threads))


THREAD_MARGIN = 16
"""Threads kept for what is not a compute pool (the interpreter, a progress bar, the solvers' own)."""


def threads_beyond_room(threads: int) -> str | None:
    """Why ``threads`` cannot be used here, or None: numpy's and torch's pools start up to ``threads - 1`` threads
    each, which must fit in what this process may still start (a pids cgroup's ``pids.max``, ``RLIMIT_NPROC``:
    :func:`hardlinear.runtime.limits.thread_room`). ``threads=1024`` where 250 may start segfaulted before."""
    from hardlinear.runtime.limits import thread_room

    room, why = thread_room()
    if room is None:
        return None
    need = 2 * (int(threads) - 1) + THREAD_MARGIN
    if need <= room:
        return None
    fits = max(1, (room - THREAD_MARGIN) // 2 + 1)
    return (f"threads={threads} needs about {need} threads (numpy's and torch's pools) but this process may start "
            f"only {room} more ({why}); set threads to at most {fits}")
