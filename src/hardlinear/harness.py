"""One run, from a resolved config to a results row. Only this module (and ``run.py``) sees the Hydra config.

Steps: build the problem, instantiate the method, skip if the same config is already recorded, build (or load)
the validation and test sets, offline set-up (decision rule), training, evaluation, then ``metrics.json`` in
the run directory and one appended row in the results CSV. A method that cannot run (a missing solver, a
licence that refuses the model) is recorded as skipped, loudly, with no metrics row.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from hardlinear import results
from hardlinear.data import atomic_write_bytes, build_dataset
from hardlinear.evaluation import EvalConfig, evaluate_method
from hardlinear.methods.base import Context, check_dtype
from hardlinear.problems import build_problem
from hardlinear.schemas import validate_config
from hardlinear.solvers import SolverUnavailable
from hardlinear.train.trainer import TrainerConfig, train

log = logging.getLogger("hardlinear")

# Keys of the problem config that are not arguments of the problem's constructor.
PROBLEM_META_KEYS = ("train",)


def git_sha() -> str:
    """The checkout's commit, ``-dirty`` when tracked files other than ``results/`` differ from it.

    Why ``results/`` is left out: a sweep appends to the committed ``results/paper/runs.csv`` while it runs,
    which changes no code; counting it would mark every row after the first as dirty."""
    try:
        root = Path(__file__).resolve().parents[2]
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        sha = out.stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results"], cwd=root, capture_output=True, text=True, timeout=5)
        return (sha + ("-dirty" if dirty.stdout.strip() else "")) if sha else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_name(device: str) -> str:
    if str(device).startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return f"cpu:{platform.processor() or platform.machine()}"


def cpu_model() -> str:
    """The CPU's model name (Linux ``/proc/cpuinfo``, else ``platform.processor()``), for provenance records."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def problem_from_config(cfg: DictConfig):
    """``cfg.problem`` minus its training schedule, as constructor arguments of the named problem."""
    options = {k: v for k, v in OmegaConf.to_container(cfg.problem, resolve=True).items() if k not in PROBLEM_META_KEYS}
    name = options.pop("name")
    return build_problem(name, **{k: v for k, v in options.items() if v is not None or k == "uncertainty"})


def resolved_dict(cfg: DictConfig) -> dict:
    return OmegaConf.to_container(cfg, resolve=True)


def run(cfg: DictConfig, run_dir: str | os.PathLike) -> dict | None:
    """Execute one configured run; returns the results row, or None when skipped."""
    validate_config(cfg)  # before any work: bad keys, types, ranges and choices fail here
    run_dir = Path(run_dir)
    torch.set_num_threads(int(cfg.threads))
    torch.manual_seed(int(cfg.seed))  # only for modules' default initialisation; sampling uses generators
    dtype = check_dtype(cfg.dtype)
    config = resolved_dict(cfg)
    chash = results.config_hash(config)
    csv_path = str(cfg.results_csv)
    if cfg.skip_recorded and results.is_recorded(csv_path, chash):
        print(f"[hardlinear] skip: this configuration (hash {chash}) is already recorded in {csv_path}", flush=True)
        return None

    problem = problem_from_config(cfg)
    method = instantiate(cfg.method, _convert_="all")
    ctx = Context(
        cache_dir=str(cfg.cache_dir), device=str(cfg.device), dtype=dtype, seed=int(cfg.seed),
        progress=bool(cfg.progress), network=dict(cfg.network),
    )
    identity = {
        **problem.identity(),
        "method": method.name,
        **method.describe(),
        "seed": int(cfg.seed),
        "penalty": getattr(method, "penalty", ""),
        "pretrain_epochs": int(cfg.trainer.pretrain_epochs) if getattr(method, "pretrain", True) and method.trainable else 0,
        "experiment": str(cfg.experiment or ""),
        "git_sha": git_sha(),
        "device": device_name(ctx.device),
        "dtype": cfg.dtype,
        "run_dir": str(run_dir),
        "config_hash": chash,
        **problem.sizes(),
    }
    print(f"[hardlinear] {problem.describe()} | method={method.name} {identity['variant']} | seed={cfg.seed} | run dir {run_dir}", flush=True)

    loggers = results_loggers(cfg, run_dir, config)
    try:
        row = _execute(cfg, problem, method, ctx, identity, loggers, csv_path)
    finally:
        loggers.finish()  # also on errors: an offline W&B run is closed, not left open
    return row


def _execute(cfg: DictConfig, problem, method, ctx: Context, identity: dict, loggers, csv_path: str) -> dict | None:
    run_dir = Path(identity["run_dir"])
    try:
        # --- data: validation and test sets with reference solutions (cached) ---
        val = build_dataset(problem, "val", int(cfg.data.val_size), int(cfg.seed), cfg.data.solver, ctx.cache_dir, ctx.progress)
        test = build_dataset(problem, "test", int(cfg.data.test_size), int(cfg.data.test_seed), cfg.data.solver, ctx.cache_dir, ctx.progress)
        # --- offline work (decision rule, factorisations) ---
        offline_s = method.setup(problem, ctx)
        method.to(ctx.device)
        # --- training ---
        trainer_cfg = TrainerConfig(**{k: v for k, v in OmegaConf.to_container(cfg.trainer, resolve=True).items() if k != "name"})
        supervised = None
        if method.trainable and method.supervised:
            supervised = build_dataset(problem, "train", trainer_cfg.supervised_size, int(cfg.seed), cfg.data.solver, ctx.cache_dir, ctx.progress)
        fit = train(method, problem, val, trainer_cfg, ctx, loggers=loggers, supervised=supervised)
        # --- evaluation (timed on the test set) ---
        metrics = evaluate_method(method, problem, test, ctx, EvalConfig(**OmegaConf.to_container(cfg.eval, resolve=True)))
    except SolverUnavailable as err:
        reason = str(err).splitlines()[0]
        print(f"[hardlinear] SKIPPED {problem.name}/{method.name} {identity['variant']}: {reason}", file=sys.stderr, flush=True)
        results.record_skip(csv_path, {**identity, "timestamp": _now()}, reason)
        return None
    metrics.update({"train/time_s": fit.time_s, "offline/time_s": offline_s, "offline/t_star": getattr(method, "t_star", float("nan"))})
    metrics["train/best_epoch"] = fit.best_epoch
    metrics.update(fit.val_metrics)  # validation figures of the kept checkpoint (model selection)
    metrics["data/val_build_s"], metrics["data/test_build_s"] = val.build_time_s, test.build_time_s
    metrics["data/ref_solve_ms"] = 1000.0 * float(test.solve_time_s.mean())

    row = {**identity, "timestamp": _now(), "status": "ok", **metrics}
    atomic_write_bytes(run_dir / "metrics.json", json.dumps(row, indent=2, default=float).encode())
    results.append_row(csv_path, row)
    loggers.log_final(metrics)
    print(
        f"[hardlinear] done {problem.name}/{method.name}: gap {metrics['test/gap_mean']:.3f}% "
        f"(worst {metrics['test/gap_worst']:.3f}), eq {metrics['test/eq_viol_worst']:.1e}, "
        f"ineq {metrics['test/ineq_viol_worst']:.1e}, {metrics['test/time_ms']:.2f} ms/instance",
        flush=True,
    )
    return row


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def results_loggers(cfg: DictConfig, run_dir: Path, config: dict):
    from hardlinear.loggers import make_loggers

    options = OmegaConf.to_container(cfg.logger, resolve=True)
    names = options.pop("names", ["csv"])
    loggers = make_loggers(names, str(run_dir), config=config, **options)
    loggers.log_config(config)
    return loggers




def run_in_sweep(cfg: DictConfig, run_dir: str | os.PathLike) -> dict | None:
    """``run`` for one job of a sweep: an error is printed with its traceback and recorded as a skipped
    run (with the reason), so the other runs of the sweep go on."""
    import traceback

    try:
        return run(cfg, run_dir)
    except Exception as err:  # noqa: BLE001 - the sweep must outlive one broken run
        traceback.print_exc()
        reason = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        print(f"[hardlinear] FAILED run in {run_dir}: {reason}", file=sys.stderr, flush=True)
        identity = {
            "problem": cfg.problem.name, "objective": cfg.problem.get("objective", ""), "form": cfg.problem.get("form", ""),
            "method": cfg.method.get("name", ""), "variant": cfg.method.get("solver", ""), "seed": int(cfg.seed),
            "penalty": cfg.method.get("penalty", ""), "experiment": str(cfg.experiment or ""),
            "run_dir": str(run_dir), "config_hash": results.config_hash(resolved_dict(cfg)), "timestamp": _now(),
        }
        results.record_skip(str(cfg.results_csv), identity, reason)
        return None
