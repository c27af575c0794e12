"""Datasets of inputs with reference solutions, and the on-disk cache that keeps them.

A dataset is a set of inputs drawn from the box with a seeded generator, or given (the problem's fixed inputs
for the split, e.g. DC3's published split or a user's ``val_inputs``/``test_inputs``, or an ``inputs`` array),
solved by the reference solver.
It is cached under ``cache_dir`` keyed by a hash of everything that determines it (the problem's data
fingerprint, split, size, seed, solver, whether line rows were added lazily, format version); the file carries a SHA-256 checksum of its arrays,
so a truncated or edited cache is detected and rebuilt with a message. Writes are atomic (temp file +
``os.replace``): a killed build leaves no half-written cache.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from filelock import FileLock, Timeout

from hardlinear.runtime.atomic import atomic_write_bytes  # noqa: F401 - re-exported: harness, checkpoints
from hardlinear.runtime.npz import check_npz_fits

log = logging.getLogger(__name__)

FORMAT_VERSION = "1"
# Offsets keep the splits' random streams apart for one seed.
SPLIT_OFFSETS = {"train": 1_000, "val": 2_000, "test": 3_000}


@dataclass
class Dataset:
    """Inputs ``xi: (N, k)`` with reference solutions ``y: (N, n)`` (problem's form) and objectives ``(N,)``."""

    xi: torch.Tensor
    y: torch.Tensor
    objective: torch.Tensor
    solve_time_s: np.ndarray
    solver: str
    build_time_s: float = 0.0
    from_cache: bool = False
    lazy_rows: bool = False  # solved with lazy line rows (hardlinear.problems.ed_reference)

    def __len__(self) -> int:
        return int(self.xi.shape[0])


def dataset_key(problem, split: str, size: int, seed: int, solver: str, inputs: np.ndarray | None = None,
                lazy_rows: bool = False) -> str:
    """Hash of everything that determines a dataset; given inputs enter by their bytes (size and seed then
    do not matter). Lazy rows enter the key (``rows: lazy``): they reach the same optimum, but where it is not
    unique, another optimal vertex, so a lazy set is never served for a whole-LP one or back. Whole-LP sets keep
    the key they had before lazy rows existed."""
    fields = {"problem": problem.fingerprint(), "split": split, "size": size, "seed": seed, "solver": solver, "v": FORMAT_VERSION}
    if lazy_rows:
        fields["rows"] = "lazy"
    if inputs is not None:
        fields.update(size=0, seed=0, inputs=hashlib.sha256(np.ascontiguousarray(inputs, dtype=np.float64).tobytes()).hexdigest())
    payload = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def _checksum(arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        h.update(name.encode())
        h.update(np.ascontiguousarray(arrays[name]).tobytes())
    return h.hexdigest()


def save_arrays(path: Path, arrays: dict[str, np.ndarray], meta: dict) -> None:
    """Atomic ``.npz`` with a checksum of the arrays stored beside them."""
    meta = {**meta, "checksum": _checksum(arrays)}
    buf = io.BytesIO()
    np.savez(buf, __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)
    atomic_write_bytes(path, buf.getvalue())


def load_arrays(path: Path) -> tuple[dict[str, np.ndarray], dict] | None:
    """The arrays and metadata of a cache file, or None (with a warning) if it is missing or corrupt."""
    if not path.exists():
        return None
    try:
        check_npz_fits(path, "cache file")  # a forged file's declared shapes, before anything is inflated
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(bytes(z["__meta__"]).decode())
            arrays = {k: z[k] for k in z.files if k != "__meta__"}
    except Exception as err:  # truncated zip, bad JSON, ...
        log.warning("cache file %s is unreadable (%s); rebuilding it", path, err)
        return None
    if meta.get("checksum") != _checksum(arrays):
        log.warning("cache file %s fails its checksum (edited or corrupt); rebuilding it", path)
        return None
    return arrays, meta


def _key_mismatch(cached, key: str, problem, split: str, size: int, seed: int, solver: str, given: bool,
                  lazy_rows: bool = False) -> str | None:
    """Why a cache file (checksum valid) is not the set asked for, or None. Why: the checksum proves the file
    is whole, not that it is this set; a test-split file copied over the validation file would otherwise be
    served as the validation set (model selection on the test set). Files from before the key was stored are
    checked by the fields they carry."""
    arrays, meta = cached
    wanted = {"problem": problem.name, "split": split, "solver": solver}
    if meta.get("lazy_rows", False) != lazy_rows:
        return f"it holds lazy_rows={meta.get('lazy_rows', False)!r}, not {lazy_rows!r}"
    if not given:
        wanted.update(size=size, seed=seed)
    for field, value in wanted.items():
        if meta.get(field) != value:
            return f"it holds {field}={meta.get(field)!r}, not {value!r}"
    if "fingerprint" in meta and meta["fingerprint"] != problem.fingerprint():
        return "it was built for other problem data"
    if "key" in meta and meta["key"] != key:
        return f"its key {str(meta['key'])[:20]!r} is not {key!r}"
    try:
        rows = {len(arrays[name]) for name in ("xi", "y", "objective", "solve_time_s")}
        shape_ok = len(rows) == 1 and arrays["xi"].ndim == 2 and arrays["xi"].shape[1] == problem.box.k
    except (KeyError, TypeError, AttributeError):
        shape_ok = False
    return None if shape_ok else "its arrays are missing or of the wrong shape"


def build_dataset(
    problem,
    split: str,
    size: int,
    seed: int,
    solver: str | None = None,
    cache_dir: str | os.PathLike | None = "data/cache",
    progress: bool = True,
    inputs: np.ndarray | torch.Tensor | None = None,
    workers: int = 1,
    lazy_rows: bool | None = None,
    executor: str = "process",
    scheduler: str | None = None,
) -> Dataset:
    """Inputs for ``split`` with reference solutions, from the cache when a valid copy exists.

    The inputs are ``inputs`` when given, else the problem's fixed inputs for the split
    (``problem.inputs_for(split)``) when it has them, else ``size`` samples from the box seeded by ``seed``;
    given inputs are used whole (``size`` and ``seed`` are then ignored, and a differing ``size`` is logged).
    ``workers``, ``executor``, ``scheduler``: where the reference solves run (:func:`hardlinear.solvers.solve_batch`:
    forked processes here, or a dask cluster); the solutions, hence the cache key, do not depend on them.
    ``lazy_rows``: line rows added as they are violated (None: the problem's default, lazy for the dispatch on
    HiGHS; :meth:`~hardlinear.problems.base.Problem.resolve_lazy_rows`); part of the key.
    """
    if split not in SPLIT_OFFSETS:
        raise ValueError(f"split must be one of {sorted(SPLIT_OFFSETS)}; got {split!r}")
    if size < 1:
        raise ValueError(f"dataset size must be >= 1; got {size}")
    solver = solver or problem.default_solver()
    lazy = problem.resolve_lazy_rows(lazy_rows, solver)
    run = {"workers": workers, "executor": executor, "scheduler": scheduler, "lazy_rows": lazy}
    if inputs is None and hasattr(problem, "inputs_for"):
        inputs = problem.inputs_for(split)
    if inputs is not None:
        from hardlinear.problems.linear import check_inputs

        inputs = check_inputs(
            f"{split} inputs", inputs.detach().cpu().numpy() if isinstance(inputs, torch.Tensor) else inputs, problem.box,
            getattr(problem.compact, "polytope", None),
        )
        if len(inputs) != size:
            log.info("%s %s set: using the %d given inputs (size=%d is ignored)", problem.name, split, len(inputs), size)
    if cache_dir is None:
        return _solved_set(problem, split, size, seed, solver, progress, inputs, run, None, None)
    key = dataset_key(problem, split, size, seed, solver, inputs, lazy)
    path = Path(cache_dir) / f"{problem.name}-{split}-{key}.npz"
    found = _cached_set(path, key, problem, split, size, seed, solver, inputs is not None, lazy)
    if found is not None:
        return found
    # one run builds a set at a time: another run wanting the same set waits for it and reads the cache, rather than
    # solving the same instances beside it (at case9241, 40 minutes a set on one core)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path) + ".lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log.info("%s %s set: another run is building it (%s.lock); waiting for it", problem.name, split, path)
        lock.acquire()
    try:
        found = _cached_set(path, key, problem, split, size, seed, solver, inputs is not None, lazy)
        if found is not None:
            return found
        return _solved_set(problem, split, size, seed, solver, progress, inputs, run, path, key)
    finally:
        lock.release()


def _cached_set(path: Path, key: str, problem, split: str, size: int, seed: int, solver: str, given: bool,
                lazy_rows: bool) -> Dataset | None:
    """The cached set at ``path`` when it is the one ``key`` names; None (with a warning for a wrong file) else."""
    cached = load_arrays(path)
    mismatch = cached is not None and _key_mismatch(cached, key, problem, split, size, seed, solver, given, lazy_rows)
    if mismatch:
        log.warning("cache file %s is not the %s %s set it is named for (%s); rebuilding it", path, problem.name, split, mismatch)
        return None
    if cached is None:
        return None
    a, meta = cached
    return Dataset(
        xi=torch.as_tensor(a["xi"]),
        y=torch.as_tensor(a["y"]),
        objective=torch.as_tensor(a["objective"]),
        solve_time_s=a["solve_time_s"],
        solver=solver,
        build_time_s=float(meta.get("build_time_s", 0.0)),
        from_cache=True,
        lazy_rows=lazy_rows,
    )


def _solved_set(problem, split: str, size: int, seed: int, solver: str, progress: bool, inputs: np.ndarray | None,
                run: dict, path: Path | None, key: str | None) -> Dataset:
    """The set solved now (``run``: :func:`~hardlinear.solvers.solve_batch`'s workers, executor, scheduler and
    lazy_rows), saved to ``path`` (under ``key``) when one is given."""
    t0 = time.perf_counter()
    if inputs is not None:
        xi = torch.as_tensor(inputs, dtype=torch.float64)
    else:
        xi = problem.sample(size, generator=torch.Generator().manual_seed(seed + SPLIT_OFFSETS[split]))
    sol = problem.solve(xi, solver=solver, progress=progress, **run)
    build_time = time.perf_counter() - t0
    arrays = {"xi": xi.numpy(), "y": sol.y, "objective": sol.objective, "solve_time_s": sol.time_s}
    if path is not None:
        save_arrays(path, arrays, {"key": key, "fingerprint": problem.fingerprint(), "problem": problem.name, "split": split, "size": len(xi), "seed": seed, "given": inputs is not None, "solver": solver, "lazy_rows": run["lazy_rows"],
                                 "build_time_s": build_time})
        log.info("built %s %s set (%d instances, %s) in %.1f s -> %s", problem.name, split, len(xi), solver, build_time, path)
    return Dataset(
        xi=xi,
        y=torch.as_tensor(sol.y),
        objective=torch.as_tensor(sol.objective),
        solve_time_s=sol.time_s,
        solver=solver,
        build_time_s=build_time,
        lazy_rows=run["lazy_rows"],
    )
