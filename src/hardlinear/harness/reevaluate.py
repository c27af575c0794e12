"""Evaluate a saved run again, on a new test set or on the user's own inputs (``evaluate.py`` is the CLI).

The run's model is reloaded by :func:`hardlinear.load_run` (its outputs checked against the ones it saved),
the test inputs are drawn with another ``data.test_seed`` / ``data.test_size`` or read from a file, their
reference solutions are computed by the run's reference solver (cached like a run's test set), and the same
evaluation as a run's (float64 metrics, batch-1 timing, throughput) writes a record (``record.json``, by
``results.write_record``), ``metrics.json`` and ``predictions.npz`` into a new folder under
``<run_dir>/eval/`` (never over the run's own files).

The record is a run of its own for the loader and the tables: study ``<the run's study>-eval`` (or the one
given), config = the run's config with the new ``data.test_seed`` / ``data.test_size`` and an ``evaluated``
section (the run's directory and identity, the inputs file and its sha256), so its identity differs from the
run's and the loader never takes it for a duplicate of the run.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hardlinear.data import Dataset, atomic_write_bytes, build_dataset


def read_inputs(path: str | os.PathLike, k: int) -> torch.Tensor:
    """``(N, k)`` float64 inputs from ``.npy``, ``.npz`` (array ``xi``) or ``.csv`` (no header, one row each)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"inputs file not found: {path}")
    if path.suffix == ".npy":
        xi = np.load(path, allow_pickle=False)
    elif path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as archive:
            if "xi" not in archive:
                raise ValueError(f"{path} has no array 'xi' (arrays: {', '.join(archive.files)}); save the inputs as xi=...")
            xi = archive["xi"]
    elif path.suffix == ".csv":
        xi = np.loadtxt(path, delimiter=",", ndmin=2)
    else:
        raise ValueError(f"inputs file {path} must be .npy, .npz (array xi) or .csv")
    xi = np.asarray(xi, dtype=np.float64)
    if xi.ndim != 2 or xi.shape[1] != k:
        raise ValueError(f"inputs in {path} must have shape (N, {k}) for this problem; got {xi.shape}")
    if not np.isfinite(xi).all():
        raise ValueError(f"inputs in {path} contain NaN or inf (rows {np.flatnonzero(~np.isfinite(xi).all(1))[:5].tolist()})")
    return torch.as_tensor(xi)


def evaluate_run(
    run_dir: str | os.PathLike,
    *,
    test_seed: int | None = None,
    test_size: int | None = None,
    inputs: str | os.PathLike | None = None,
    out_dir: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    study: str | None = None,
) -> dict[str, Any]:
    """Re-evaluate the saved model of ``run_dir``; returns the row written to ``<out_dir>/record.json`` (also
    in ``metrics.json``), plus ``out_dir``.

    Defaults: the run's own ``data.test_seed`` and ``data.test_size``; ``inputs`` replaces the sampled test set;
    ``study``: ``<the run's study>-eval``.
    """
    from hardlinear.evaluation import EvalConfig, divergence_reason, evaluate_method
    from hardlinear.harness import results
    from hardlinear.harness.checkpoint import load_run
    from hardlinear.harness.runner import provenance
    from hardlinear.methods.base import Context, check_dtype

    run_dir = Path(run_dir)
    method = load_run(run_dir, cache_dir=cache_dir)
    config, problem = method.run_config, method.problem
    data_cfg = dict(config.get("data") or {})
    seed = int(data_cfg.get("test_seed", 12345) if test_seed is None else test_seed)
    size = int(data_cfg.get("test_size", 100) if test_size is None else test_size)
    solver = data_cfg.get("solver") or problem.default_solver()
    cache = str(cache_dir if cache_dir is not None else config.get("cache_dir", "data/cache"))
    if inputs is not None:
        xi = read_inputs(inputs, problem.box.k)
        sol = problem.solve(xi, solver=solver, progress=False)
        test = Dataset(xi=xi, y=torch.as_tensor(sol.y), objective=torch.as_tensor(sol.objective), solve_time_s=sol.time_s, solver=solver)
    else:
        test = build_dataset(problem, "test", size, seed, solver, cache, progress=False)
    ctx = Context(cache_dir=cache, device="cpu", dtype=check_dtype(config.get("dtype", "float32")), seed=int(config.get("seed", 0)), progress=False)
    metrics = evaluate_method(method, problem, test, ctx, EvalConfig(**dict(config.get("eval") or {})))
    metrics["data/ref_solve_ms"] = 1000.0 * float(np.mean(test.solve_time_s))
    with torch.no_grad():
        y = method.predict(test.xi.to(torch.float64)).y.to("cpu", torch.float64)

    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    label = f"inputs-{Path(inputs).stem}" if inputs is not None else f"test_seed{seed}-n{size}"
    out = Path(out_dir) if out_dir is not None else run_dir / "eval" / f"{stamp}-{label}"
    original = _run_record(run_dir)
    base_config = original["config"] if original else dict(config)
    base_row = original["row"] if original else _run_identity(run_dir)
    new_config = copy.deepcopy(base_config)
    new_config.setdefault("data", {})
    new_config["data"]["test_seed"] = seed if inputs is None else None
    new_config["data"]["test_size"] = len(test)
    new_config["evaluated"] = {
        "run_dir": str(run_dir), "identity": original["identity"] if original else "",
        "inputs": str(inputs) if inputs is not None else None,
        "inputs_sha256": hashlib.sha256(Path(inputs).read_bytes()).hexdigest() if inputs is not None else None,
    }
    new_study = study or f"{original['study'] if original else results.study_of(base_config)}-eval"
    new_config["study"] = new_study
    ident = results.identity(new_config)
    diverged = divergence_reason(metrics, EvalConfig(**dict(config.get("eval") or {})))
    status = "diverged" if diverged else "ok"
    row = {
        **{k: v for k, v in base_row.items() if "/" not in k},
        "run_dir": str(out), "config_hash": ident, "timestamp": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "status": status,
        "evaluated_run": str(run_dir),
        "eval_inputs": str(inputs) if inputs is not None else "",
        "data.test_seed": seed if inputs is None else None,
        "data.test_size": len(test),
        **metrics,
    }
    buf = _npz(xi=test.xi.numpy(), y=y.numpy(), objective_ref=np.asarray(test.objective))
    atomic_write_bytes(out / "predictions.npz", buf)
    atomic_write_bytes(out / "metrics.json", json.dumps(row, indent=2, default=float).encode())
    results.write_record(out, {
        "identity": ident, "study": new_study, "config": new_config, "provenance": provenance("cpu"),
        "status": status, "reason": diverged or "", "row": row,
    })
    return {**row, "study": new_study, "out_dir": str(out)}


def _run_record(run_dir: Path) -> dict[str, Any] | None:
    """The run's own verified record (``results.read_record``), or None for a run directory without one."""
    from hardlinear.harness import results

    path = run_dir / results.RECORD_FILE
    return results.read_record(path) if path.is_file() else None


def _run_identity(run_dir: Path) -> dict[str, Any]:
    """The run's own identity columns (problem, method, seed, ...) from its ``metrics.json``, minus its metrics."""
    path = run_dir / "metrics.json"
    if not path.is_file():
        return {}
    row = json.loads(path.read_text())
    return {k: v for k, v in row.items() if "/" not in k and k not in ("timestamp", "status", "run_dir")}


def _npz(**arrays: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()
