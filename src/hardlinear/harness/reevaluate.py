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
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hardlinear.problems.datasets import Dataset, atomic_write_bytes, build_dataset
from hardlinear.runtime.npz import ArraysTooLarge, check_npz_fits

MAX_INPUT_ROWS = 10_000_000
"""Most rows an inputs file may hold (each is solved by the reference solver: far more is a mistake)."""


def read_inputs(path: str | os.PathLike, k: int) -> torch.Tensor:
    """``(N, k)`` float64 inputs from ``.npy``, ``.npz`` (array ``xi``) or ``.csv`` (no header, one row each);
    ``ValueError`` naming the file and the fix for anything else (empty, wrong shape, non-finite, unreadable)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"inputs file not found: {path}")
    if not path.is_file():
        raise ValueError(f"inputs file {path} is not a regular file (a folder or a device); give a .npy, .npz or .csv file")
    if path.suffix not in (".npy", ".npz", ".csv"):
        raise ValueError(f"inputs file {path} must be .npy, .npz (array xi) or .csv")
    try:
        if path.suffix == ".npy":
            xi = np.load(path, allow_pickle=False, mmap_mode="r")
        elif path.suffix == ".npz":
            check_npz_fits(path, "inputs file")  # the declared shapes against the memory, before anything is inflated
            with np.load(path, allow_pickle=False) as archive:
                if "xi" not in archive:
                    raise KeyError(f"{path} has no array 'xi' (arrays: {', '.join(archive.files)}); save the inputs as xi=...")
                xi = archive["xi"]
        else:
            xi = np.loadtxt(path, delimiter=",", ndmin=2)
        if getattr(xi, "ndim", 0) == 2 and xi.shape[0] > MAX_INPUT_ROWS:
            raise ValueError(f"{xi.shape[0]} rows, more than the {MAX_INPUT_ROWS} an evaluation takes; split the file")
        if not np.issubdtype(np.asarray(xi).dtype, np.number) or np.iscomplexobj(xi):
            raise ValueError(f"its array has dtype {np.asarray(xi).dtype}, not real numbers")
        xi = np.array(xi, dtype=np.float64)
    except KeyError as err:
        raise ValueError(str(err.args[0])) from None
    except ArraysTooLarge:
        raise
    except Exception as err:  # noqa: BLE001 - a damaged zip, a bad header, text in a CSV: all "unreadable"
        raise ValueError(f"inputs file {path} cannot be read as {path.suffix} ({type(err).__name__}: {err})") from None
    if xi.ndim != 2 or xi.shape[1] != k:
        raise ValueError(f"inputs in {path} must have shape (N, {k}) for this problem; got {xi.shape}")
    if xi.shape[0] == 0:
        raise ValueError(f"inputs in {path} have no rows (shape {xi.shape}); give at least one input of {k} values")
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
    files: Mapping[str, str | os.PathLike] | None = None,
    study: str | None = None,
    allow_missing_probe: bool = False,
) -> dict[str, Any]:
    """Re-evaluate the saved model of ``run_dir``; returns the row written to ``<out_dir>/record.json`` (also
    in ``metrics.json``), plus ``out_dir``.

    Defaults: the run's own ``data.test_seed`` and ``data.test_size``; ``inputs`` replaces the sampled test set;
    ``study``: ``<the run's study>-eval``. An existing, non-empty ``out_dir`` is refused before any work; the
    outputs are written into a fresh hidden folder beside it and published together by one rename, so the
    folder holds all of them or none. ``allow_missing_probe`` and ``files`` (the problem files the run read, named by
    the caller): see :func:`hardlinear.load_run`.
    """
    from hardlinear.evaluation.metrics import per_instance_csv
    from hardlinear.evaluation.protocol import EvalConfig, divergence_reason, evaluate_method_instances
    from hardlinear.harness import results
    from hardlinear.harness.checkpoint import load_run
    from hardlinear.harness.origin import provenance
    from hardlinear.harness.schemas import output_path_problem
    from hardlinear.methods.base import Context, check_dtype
    from hardlinear.problems.linear import check_inputs

    run_dir = Path(run_dir)
    if out_dir is not None:
        refuse_existing_out(Path(out_dir))
        unusable = output_path_problem(str(out_dir), "folder", "evals/new")
        if unusable:  # before the reload and the solves, not as an errno from inside the publishing step
            raise ValueError(f"--out {out_dir} {unusable}")
    if test_size is not None and not 1 <= test_size <= MAX_INPUT_ROWS:
        raise ValueError(f"--test-size must be in [1, {MAX_INPUT_ROWS:,}] (each instance is solved by the reference "
                         f"solver); got {test_size:,}")
    if study is not None:
        results.check_study_name(study, "--study")
    method = load_run(run_dir, cache_dir=cache_dir, files=files, allow_missing_probe=allow_missing_probe)
    config, problem = method.run_config, method.problem
    eval_cfg = EvalConfig(**dict(config.get("eval") or {}))
    from hardlinear.harness.preflight import check_batch_memory  # the stored throughput batch, before it is sampled

    check_batch_memory(problem, dict(config.get("network") or {}), 1, int(eval_cfg.throughput_batch),
                       net_bytes=check_dtype(config.get("dtype", "float32")).itemsize)
    data_cfg = dict(config.get("data") or {})
    seed = int(data_cfg.get("test_seed", 12345) if test_seed is None else test_seed)
    size = int(data_cfg.get("test_size", 100) if test_size is None else test_size)
    solver = data_cfg.get("solver") or problem.default_solver()
    # a run's config from before data.lazy_rows was solved with every row: its test set again so (False)
    lazy_rows = data_cfg.get("lazy_rows") if "lazy_rows" in data_cfg else False
    cache = None if cache_dir is None else str(cache_dir)  # the caller's (None: nothing cached), never the checkpoint's
    if inputs is not None:
        xi = read_inputs(inputs, problem.box.k)
        # outside the box a reference instance may have no solution (a solver traceback) and the rule no guarantee
        xi = torch.as_tensor(check_inputs(f"inputs in {inputs}", xi.numpy(), problem.box, getattr(problem.family, "polytope", None)))
        sol = problem.solve(xi, solver=solver, progress=False, lazy_rows=lazy_rows)
        test = Dataset(xi=xi, y=torch.as_tensor(sol.y), objective=torch.as_tensor(sol.objective), solve_time_s=sol.time_s, solver=solver,
                       lazy_rows=problem.resolve_lazy_rows(lazy_rows, solver))
    else:
        test = build_dataset(problem, "test", size, seed, solver, cache, progress=False, lazy_rows=lazy_rows)
    ctx = Context(cache_dir=cache, device="cpu", dtype=check_dtype(config.get("dtype", "float32")), seed=int(config.get("seed", 0)), progress=False)
    metrics, per_instance = evaluate_method_instances(method, problem, test, ctx, eval_cfg)
    metrics["data/ref_solve_ms"] = 1000.0 * float(np.mean(test.solve_time_s))
    metrics["data/ref_lazy_rows"] = float(test.lazy_rows)
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
    record = {
        "identity": ident, "study": new_study, "config": new_config, "provenance": provenance("cpu"),
        "status": status, "reason": diverged or "", "row": row,
    }
    publish_outputs(out, {"predictions.npz": buf, "metrics.json": json.dumps(row, indent=2, default=float).encode(),
                          results.PER_INSTANCE_FILE: per_instance_csv(per_instance)}, record)
    try:
        mirror_to_wandb(out, record)
    except ImportError as err:  # a core install re-evaluating a run that logged to W&B: the record is the result
        import warnings

        warnings.warn(f"the evaluation is recorded in {out}; it is not mirrored to W&B: {err}", stacklevel=2)
    return {**row, "study": new_study, "out_dir": str(out)}


def mirror_to_wandb(out: Path, record: dict[str, Any]) -> None:
    """When the evaluated run logged to W&B (``logger=wandb``), its evaluation does too: a run with ``job_type=eval``
    (``wandb_labels``: the config carries ``evaluated``) in ``<out>/wandb/``, offline unless ``$WANDB_MODE`` or the
    run's ``logger.mode`` says otherwise, with the metrics and the record's status and identity in its summary.
    Written after the outputs are published: the record is the result, W&B a mirror of it."""
    from hardlinear.harness.loggers import WandbLogger, wandb_labels

    config = record["config"]
    options = dict(config.get("logger") or {})
    if "wandb" not in (options.pop("names", None) or []):
        return
    options = {k: v for k, v in options.items() if k in ("project", "mode", "log_checkpoint", "verbose")}
    logger = WandbLogger(str(out), config=config, **{**wandb_labels(config), **options})
    try:
        logger.log_final({k: v for k, v in record["row"].items() if "/" in k})
        logger.log_status({"status": record["status"], "reason": record["reason"], "study": record["study"], "identity": record["identity"]})
    finally:
        logger.finish()


def refuse_existing_out(out: Path) -> None:
    """``FileExistsError`` for an ``--out`` that exists and is not an empty folder: its files are never mixed
    with or replaced by this evaluation's."""
    if out.is_dir() and not any(out.iterdir()):
        return
    if out.exists() or out.is_symlink():
        raise FileExistsError(
            f"--out {out} exists; an evaluation never writes over or beside other files: give a new folder, or leave "
            "--out out to get a fresh one under RUN_DIR/eval/"
        )


def publish_outputs(out: Path, files: dict[str, bytes], record: dict[str, Any]) -> Path:
    """Write ``files`` and the record into a fresh hidden folder beside ``out``, then rename it to ``out`` (one
    step: readers see all the outputs or none). If ``out`` appeared meanwhile, the outputs stay in the hidden
    folder, named in the ``FileExistsError``: nothing computed is lost, nothing is mixed."""
    import shutil
    import tempfile

    from hardlinear.harness import results

    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".partial"))
    try:
        for name, data in files.items():
            atomic_write_bytes(staging / name, data)
        results.write_record(staging, record)  # last: a staging folder without it holds no result
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    try:
        refuse_existing_out(out)
        if out.is_dir():
            out.rmdir()  # empty (checked): the rename below cannot replace a folder that has entries
        os.rename(staging, out)
    except OSError as err:
        raise FileExistsError(f"{out} could not be published ({err}); this evaluation's outputs are whole in {staging}") from None
    from hardlinear.runtime.atomic import fsync_dir

    fsync_dir(out.parent)
    return out


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
