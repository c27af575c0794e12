"""One run, from a resolved config to a record. Only this module (and ``run.py``) sees the Hydra config.

Steps: skip if the run's identity is already recorded under ``results_dir`` (``rerun=true`` forces it), build
the problem, instantiate the method, the checks that need the problem (memory), offline set-up (decision rule: a
level without one fails here, before any data), build (or load) the validation and test sets, training (the
kept checkpoint saved as ``checkpoint.pt``), evaluation, then ``record.json`` (and ``metrics.json``) in the run
directory. A method that cannot run (a missing solver, a licence that refuses the model) is recorded
``skipped``, one that does not apply ``not_applicable``, a run that blows up ``diverged``, an error ``failed``:
loudly, each with its reason.
"""

from __future__ import annotations

# ruff: noqa: E402 - the imports after require_extra() need the harness extra
import json
import logging
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from hardlinear.harness import require_extra

require_extra()  # before Hydra's imports: a core install gets the pip line, not ModuleNotFoundError

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from hardlinear.evaluation.metrics import infeasibility, per_instance_csv
from hardlinear.evaluation.protocol import EvalConfig, divergence_reason, evaluate_method_instances
from hardlinear.harness import results
from hardlinear.harness.checkpoint import save_checkpoint
from hardlinear.harness.content import short_digest, with_content
from hardlinear.harness.last_state import read_last, resume_problem, save_last
from hardlinear.harness.loggers import results_table
from hardlinear.harness.origin import cpu_model, device_name, git_sha, provenance, sweep_token  # noqa: F401 - cpu_model: re-exported for old imports
from hardlinear.harness.origin import utc_now as _now
from hardlinear.harness.preflight import check_batch_memory, setup_method
from hardlinear.harness.pretraining import method_pretrains
from hardlinear.harness.reload import pinned_threads
from hardlinear.harness.schemas import ConfigError, output_path_problem, validate_config
from hardlinear.harness.sweep import note_unrecorded_failure
from hardlinear.methods.base import Context, NotApplicable, check_dtype
from hardlinear.problems import build_problem, planned_sizes
from hardlinear.problems.datasets import atomic_write_bytes, build_dataset
from hardlinear.runtime.atomic import DiskFull
from hardlinear.solvers import SolverUnavailable
from hardlinear.train.trainer import TrainerConfig, TrainingDiverged, train

log = logging.getLogger("hardlinear")

# Keys of the problem config that are not arguments of the problem's constructor.
PROBLEM_META_KEYS = ("train",)


def _problem_options(cfg: DictConfig) -> tuple[str, dict]:
    options = {k: v for k, v in OmegaConf.to_container(cfg.problem, resolve=True).items() if k not in PROBLEM_META_KEYS}
    name = options.pop("name")
    return name, {k: v for k, v in options.items() if v is not None or k == "uncertainty"}


def problem_from_config(cfg: DictConfig):
    """``cfg.problem`` minus its training schedule, as constructor arguments of the named problem."""
    name, options = _problem_options(cfg)
    cache_dir = cfg.get("cache_dir")
    return build_problem(name, cache_dir=None if cache_dir is None else str(cache_dir), **options)


def check_memory_before_building(cfg: DictConfig) -> None:
    """The batch-memory check of ``_execute``, run before the problem is built where its sizes can be read without
    building it (``hardlinear.problems.planned_sizes``): at case9241 the dispatch's build alone took 17 minutes before
    ``eval.throughput_batch`` was found too large. The check after the build stays (the method's own needs)."""
    name, options = _problem_options(cfg)
    sizes = planned_sizes(name, **options)
    if sizes is None:
        return
    planned = SimpleNamespace(**sizes)
    net_bytes = {"float32": 4, "float64": 8}.get(str(cfg.get("dtype", "float32")), 4)
    check_batch_memory(planned, dict(cfg.network), int(cfg.trainer.batch_size), int(cfg.eval.throughput_batch),
                       device=str(cfg.device), net_bytes=net_bytes)


def resolved_dict(cfg: DictConfig) -> dict:
    return OmegaConf.to_container(cfg, resolve=True)


def run(cfg: DictConfig, run_dir: str | os.PathLike) -> dict | None:
    """Execute one configured run and write its record; returns the results row, or None when skipped
    because its identity is already recorded or the run has no result (solver unavailable, not applicable).

    The run computes with ``threads`` threads in torch's pool and numpy's BLAS pool, also when called inside a
    process whose pools are larger (``harness.reload.pinned_threads``), so that ``load_run`` rebuilds its structure
    with the same rounding.

    Every run that starts writes one record in ``run_dir`` (``results.write_record``): ``ok``, ``diverged``
    (non-finite loss, or metrics beyond ``eval.diverged_*``), ``skipped``, ``not_applicable`` or ``failed``
    (then the error is raised again)."""
    from hardlinear.harness.rundirs import register_resolvers

    register_resolvers()  # ${lookup:...} in a config composed outside run.py (a test, a notebook, a launcher's worker)
    validate_config(cfg)  # before any work: bad keys, types, ranges and choices fail here
    with pinned_threads(cfg.threads):
        return _run(cfg, Path(run_dir))


def _run(cfg: DictConfig, run_dir: Path) -> dict | None:
    unusable = output_path_problem(str(run_dir), "folder")
    if unusable:  # Hydra has made it by now; a caller of run() may pass anything
        raise ConfigError([f"run directory {str(run_dir)!r} {unusable} (set hydra.run.dir=...)"])
    resume = cfg.trainer.get("resume")
    if resume and resume_problem(str(resume)):
        raise ConfigError([resume_problem(str(resume))])
    torch.set_num_threads(int(cfg.threads))
    torch.manual_seed(int(cfg.seed))  # only for modules' default initialisation; sampling uses generators
    dtype = check_dtype(cfg.dtype)
    config = with_content(resolved_dict(cfg))  # a problem file enters the identity by its sha256
    ident = results.identity(config)
    if not cfg.rerun:
        found = results.find_recorded(str(cfg.results_dir), ident, study=results.study_of(config))
        if found is not None:
            path, body = found
            print(f"[hardlinear] skip: this configuration (identity {ident}) is already recorded in study {body['study']} (status {body['status']}) "
                  f"in {path}; add rerun=true to run it again", flush=True)
            remove_unused_run_dir(run_dir)
            return None
    if (run_dir / results.RECORD_FILE).exists():
        raise FileExistsError(f"{run_dir / results.RECORD_FILE} exists: records are never rewritten; give the run a new "
                              "directory (hydra.run.dir=...) or leave Hydra's dated default")

    record = {"identity": ident, "study": results.study_of(config), "config": config, "provenance": provenance(str(cfg.device))}
    identity = config_identity(cfg, run_dir, ident, short_digest(config))
    try:
        check_memory_before_building(cfg)
        problem = problem_from_config(cfg)
        method = instantiate(cfg.method, _convert_="all")
        if resume and not method.trainable:  # before any data or rule: the resume would be ignored silently
            raise ConfigError([f"trainer.resume={resume} but method {method.name} trains nothing here, so there is no "
                               "training to resume; drop trainer.resume (or choose a method that trains)"])
        if resume:  # the run resumed is this run (seed, problem, method, data) and its state is in range: before any data
            try:
                read_last(str(resume), config)
            except ValueError as err:
                raise ConfigError([str(err)]) from None
        ctx = Context(
            cache_dir=str(cfg.cache_dir), device=str(cfg.device), dtype=dtype, seed=int(cfg.seed),
            progress=bool(cfg.progress), network=dict(cfg.network),
        )
        identity.update({
            **problem.identity(),
            "method": method.name,
            **method.describe(),
            "penalty": getattr(method, "penalty", ""),
            "pretrain_epochs": int(cfg.trainer.pretrain_epochs) if getattr(method, "pretrain", True) and method.trainable else 0,
            "device": device_name(ctx.device),
            **problem.sizes(),
        })
        print(f"[hardlinear] {problem.describe()} | method={method.name} {identity['variant']} | seed={cfg.seed} | run dir {run_dir}", flush=True)
        loggers = results_loggers(cfg, run_dir, config, variant=identity["variant"])
        try:
            return _execute(cfg, problem, method, ctx, identity, loggers, record)
        except BaseException as err:
            _record_error(run_dir, record, identity, err, loggers)
            raise
        finally:
            loggers.finish()  # also on errors: an offline W&B run is closed, not left open
    except BaseException as err:  # before the loggers existed (or Ctrl-C): the record still says what happened
        _record_error(run_dir, record, identity, err)
        raise


def _record_error(run_dir: Path, record: dict, identity: dict, err: BaseException, loggers=None) -> None:
    """Record a run that ended on an error as ``failed`` (or on Ctrl-C as ``interrupted``), once: an error after the
    record was written is not a failed run. ``SystemExit`` is left alone."""
    if isinstance(err, SystemExit) or (run_dir / results.RECORD_FILE).exists():
        return
    if isinstance(err, KeyboardInterrupt):
        status, reason = "interrupted", "KeyboardInterrupt: stopped by Ctrl-C (or SIGINT) before it finished"
    else:
        status, reason = "failed", failure_reason(err)
    try:
        _write(run_dir, record, identity, status, reason, loggers=loggers)
    except Exception as write_err:  # noqa: BLE001 - the original error matters more; say why there is no record
        print(f"[hardlinear] could not record the {status} run in {run_dir}: {write_err}", file=sys.stderr, flush=True)


HYDRA_ONLY = frozenset({".hydra", "run.log"})
"""What Hydra puts in a run directory before the run starts: a skipped run leaves only these, and they go."""


def remove_unused_run_dir(run_dir: Path) -> None:
    """Remove the directory Hydra made for a run that was skipped, when it holds nothing but Hydra's own files
    (a folder the user chose with other contents is left alone); its parent sweep directory too, once empty
    but for Hydra's ``multirun.yaml``."""
    import shutil

    try:
        if run_dir.is_dir() and {p.name for p in run_dir.iterdir()} <= HYDRA_ONLY:
            shutil.rmtree(run_dir)
    except OSError:
        pass  # a directory left behind is untidy, not wrong


def config_identity(cfg: DictConfig, run_dir: Path, ident: str, problem_sha256: str = "") -> dict:
    """The identity columns known from the config alone (before the problem and method are built): what a
    record of a run that failed early still says."""
    return {
        "problem": str(cfg.problem.get("name", "")), "objective": str(cfg.problem.get("objective", "") or ""),
        "form": str(cfg.problem.get("form", "") or ""), "uncertainty": cfg.problem.get("uncertainty", ""),
        "method": str(cfg.method.get("name", "")), "variant": str(cfg.method.get("solver", "") or ""),
        "seed": int(cfg.seed), "penalty": cfg.method.get("penalty", ""), "pretrain_epochs": int(cfg.trainer.get("pretrain_epochs", 0)),
        "experiment": str(cfg.experiment or ""), "git_sha": git_sha(), "device": str(cfg.device), "dtype": str(cfg.dtype),
        "run_dir": str(run_dir), "config_hash": ident, "problem_sha256": problem_sha256,
    }


def _write(run_dir: Path, record: dict, identity: dict, status: str, reason: str = "", metrics: dict | None = None, loggers=None) -> dict:
    """Write the run's record (``results.write_record``) and return its row; the loggers get its status (W&B's
    summary: status, reason, study, identity, problem content, and for a run with metrics ``feasible`` and
    ``infeasible``, the study table's verdict)."""
    row = {**identity, "timestamp": _now(), "status": status, **(metrics or {})}
    results.write_record(run_dir, {**record, "status": status, "reason": reason, "row": row})
    if loggers is not None:
        summary = {"status": status, "reason": reason, "study": record["study"], "identity": record["identity"],
                   "problem_sha256": identity.get("problem_sha256", "")}
        if metrics:
            summary.update({"feasible": not infeasibility(metrics), "infeasible": infeasibility(metrics)})
        loggers.log_status(summary)
    return row


def reference_solves(data: DictConfig) -> dict:
    """How and where the reference solves run, from the ``data`` section (keys absent from an older config take
    their defaults): :func:`~hardlinear.problems.datasets.build_dataset`'s ``workers``, ``executor``, ``scheduler``
    and ``lazy_rows``."""
    return {"workers": int(data.get("workers", 1)), "executor": data.get("executor", "process"),
            "scheduler": data.get("scheduler"), "lazy_rows": data.get("lazy_rows")}


def _execute(cfg: DictConfig, problem, method, ctx: Context, identity: dict, loggers, record: dict) -> dict | None:
    run_dir = Path(identity["run_dir"])
    eval_cfg = EvalConfig(**OmegaConf.to_container(cfg.eval, resolve=True))
    label = f"{problem.name}/{method.name} {identity['variant']}".strip()
    clock = {"run": time.perf_counter()}  # the stages' wall times (time/*_s): what scripts/time_attribution.py reads
    try:
        # --- offline work (decision rule, factorisations): first, so a problem with no rule fails before data ---
        check_batch_memory(problem, dict(cfg.network), int(cfg.trainer.batch_size), int(cfg.eval.throughput_batch), ctx, method=method)
        offline_s = setup_method(method, problem, ctx)
        method.to(ctx.device)
        # --- data: validation and test sets with reference solutions (cached) ---
        where = reference_solves(cfg.data)
        val = build_dataset(problem, "val", int(cfg.data.val_size), int(cfg.seed), cfg.data.solver, ctx.cache_dir, ctx.progress, **where)
        test = build_dataset(problem, "test", int(cfg.data.test_size), int(cfg.data.test_seed), cfg.data.solver, ctx.cache_dir, ctx.progress, **where)
        # --- training ---
        schedule = {k: v for k, v in OmegaConf.to_container(cfg.trainer, resolve=True).items() if k != "name"}
        if not method_pretrains(cfg.method):  # E2ELR, LDF, ...: the schedule's pre-training epochs do not apply
            schedule["pretrain_epochs"] = 0
        trainer_cfg = TrainerConfig(**schedule)
        supervised = None
        if method.trainable and method.supervised:
            supervised = build_dataset(problem, "train", trainer_cfg.supervised_size, int(cfg.seed), cfg.data.solver, ctx.cache_dir, ctx.progress, **where)
        clock["data"] = time.perf_counter()
        resume_state = read_last(trainer_cfg.resume, record["config"]) if trainer_cfg.resume and method.trainable else None
        fit = train(method, problem, val, trainer_cfg, ctx, loggers=loggers, supervised=supervised, resume_state=resume_state,
                    on_state=lambda state: save_last(run_dir, state, record["config"]))
        clock["train"] = time.perf_counter()
        checkpoint = save_checkpoint(run_dir, method, record["config"], probe_xi=val.xi, extra={"best_epoch": fit.best_epoch})
        clock["checkpoint"] = time.perf_counter()
        # --- evaluation (timed on the test set) ---
        metrics, per_instance = evaluate_method_instances(method, problem, test, ctx, eval_cfg)
        clock["eval"] = time.perf_counter()
    except SolverUnavailable as err:
        reason = str(err).splitlines()[0]
        print(f"[hardlinear] SKIPPED {label}: {reason}", file=sys.stderr, flush=True)
        _write(run_dir, record, identity, "skipped", reason, loggers=loggers)
        return None
    except NotApplicable as err:
        reason = " ".join(str(err).split()) or "the method does not apply to this problem"
        print(f"[hardlinear] NOT APPLICABLE {label}: {reason}", file=sys.stderr, flush=True)
        _write(run_dir, record, identity, "not_applicable", reason, loggers=loggers)
        return None
    except TrainingDiverged as err:
        reason = f"TrainingDiverged: {str(err).splitlines()[0]}"
        print(f"[hardlinear] DIVERGED {label}: {reason}", file=sys.stderr, flush=True)
        return _write(run_dir, record, identity, "diverged", reason, loggers=loggers)
    metrics.update({"train/time_s": fit.time_s, "offline/time_s": offline_s, "offline/t_star": getattr(method, "t_star", float("nan"))})
    metrics["train/best_epoch"] = fit.best_epoch
    # wall time per epoch (validation included): what separates per-instance-solver layers from one-pass ones
    metrics["train/epoch_time_s"] = fit.time_s / fit.epochs if fit.epochs else float("nan")
    metrics["train/epochs"] = fit.epochs  # fewer than trainer.epochs when trainer.time_budget_s ended training
    metrics["train/budget_spent"] = float(fit.budget_spent)
    metrics["train/early_stopped"] = float(fit.early_stopped)  # trainer.early_stop_patience ended training
    metrics["train/time_capped"] = float(fit.time_capped)  # trainer.time_cap_min ended training (after a whole epoch)
    metrics.update(fit.val_metrics)  # validation figures of the kept checkpoint (model selection)
    metrics["data/val_build_s"], metrics["data/test_build_s"] = val.build_time_s, test.build_time_s
    metrics["data/ref_solve_ms"] = 1000.0 * float(test.solve_time_s.mean())
    metrics["data/ref_lazy_rows"] = float(test.lazy_rows)  # 1: solved with lazy line rows (data.lazy_rows)
    metrics.update(stage_times(clock, offline_s, fit))

    diverged = divergence_reason(metrics, eval_cfg)
    status = "diverged" if diverged else "ok"
    atomic_write_bytes(run_dir / results.PER_INSTANCE_FILE, per_instance_csv(per_instance))  # what the statistics summarise
    atomic_write_bytes(run_dir / "metrics.json", json.dumps({**identity, "status": status, **metrics}, indent=2, default=float).encode())
    row = _write(run_dir, record, identity, status, diverged or "", metrics, loggers=loggers)
    loggers.log_final(metrics)
    loggers.log_table("results", results_table(row))
    loggers.log_checkpoint(checkpoint, {"run_dir": str(run_dir), "config_hash": identity["config_hash"]})
    if diverged:
        print(f"[hardlinear] DIVERGED {label}: {diverged}; recorded as status=diverged", file=sys.stderr, flush=True)
        return row
    print(done_line(f"{problem.name}/{method.name}", metrics, trainer_cfg, str(cfg.trainer.get("name", "")), method.trainable), flush=True)
    return row


def done_line(label: str, metrics: dict, trainer: TrainerConfig, trainer_name: str, trainable: bool = True) -> str:
    """The line a finished run prints: accuracy, violations (flagged ``INFEASIBLE`` as the study table would), time,
    and what training ran (trainer, epochs, the budget when one stopped it)."""
    flag = infeasibility(metrics)
    line = (f"[hardlinear] done {label}: gap {metrics['test/gap_mean']:.3f}% (SGM {metrics.get('test/gap_sgm', float('nan')):.3f}, "
            f"p95 {metrics.get('test/gap_p95', float('nan')):.3f}, worst {metrics['test/gap_worst']:.3f}), "
            f"eq {metrics['test/eq_viol_worst']:.1e}, ineq {metrics['test/ineq_viol_worst']:.1e}"
            f"{' ' + flag if flag else ''}, {metrics['test/time_ms']:.2f} ms/instance")
    if not trainable:
        return line + f"; not trained (trainer {trainer_name})"
    ran = metrics.get("train/epochs", float("nan"))
    if trainer.time_budget_s is not None and metrics.get("train/budget_spent"):  # the epochs it completed, never the cut epoch's fraction (13.2)
        line += f"; stopped on its budget after {int(ran)} of {trainer.epochs} epochs (trainer {trainer_name}"
    else:
        line += f"; trained {ran:.4g} of {trainer.epochs} epochs (trainer {trainer_name}"
    if trainer.time_budget_s is not None:
        spent = "spent" if metrics.get("train/budget_spent") else "not spent"
        line += f", budget {trainer.time_budget_s:g} s {spent}"
    if metrics.get("train/early_stopped"):
        line += f", stopped early (no better validation loss in {trainer.early_stop_patience} epochs)"
    if metrics.get("train/time_capped"):
        line += f", stopped at the {trainer.time_cap_min:g} min cap"
    return line + f", {metrics.get('train/time_s', float('nan')):.1f} s)"


def stage_times(clock: dict[str, float], offline_s: float, fit) -> dict[str, float]:
    """Wall seconds of a run's stages, summing to ``time/run_s``: the offline set-up (rule), the data sets (and
    their reference solves; the cache's load when cached), the training steps, validation (in the loop and the
    kept checkpoint's), the checkpoint's save, the evaluation (metrics, latency, throughput)."""
    setup = clock["data"] - clock["run"]
    train_total = clock["train"] - clock["data"]
    return {
        "time/offline_s": offline_s, "time/data_s": setup - offline_s, "time/train_steps_s": train_total - fit.val_time_s,
        "time/val_s": fit.val_time_s, "time/checkpoint_s": clock["checkpoint"] - clock["train"],
        "time/eval_s": clock["eval"] - clock["checkpoint"], "time/run_s": clock["eval"] - clock["run"],
    }


def results_loggers(cfg: DictConfig, run_dir: Path, config: dict, variant: str = ""):
    from hardlinear.harness.loggers import make_loggers, wandb_labels

    options = OmegaConf.to_container(cfg.logger, resolve=True)
    names = options.pop("names", ["csv"])
    options = {**wandb_labels(config, variant), **options}  # the config's own name/group/tags win
    loggers = make_loggers(names, str(run_dir), config=config, **options)
    loggers.log_config(config)
    return loggers




EXPECTED_ERRORS: tuple[type[BaseException], ...] = (ConfigError, FileNotFoundError, FileExistsError, ValueError)
"""Errors whose message is the whole story (a bad config, a missing or malformed file): printed as one line, with
the traceback only when ``HYDRA_FULL_ERROR=1`` (as Hydra does)."""


def _recorded_by_this_sweep(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a record this sweep wrote (a ``FileExistsError`` finds another process's)."""
    try:
        record = results.read_record(run_dir / results.RECORD_FILE)
    except (results.BadRecord, OSError):
        return False
    return (record.get("provenance") or {}).get("sweep_token") == sweep_token()


def failure_reason(err: BaseException) -> str:
    """``Type: first line`` of the error that explains a failure: Hydra's ``InstantiationException`` ("Error in
    call to target ...") gives way to the error the constructor raised, whose text names the fix."""
    while type(err).__name__ == "InstantiationException" and err.__cause__ is not None:
        err = err.__cause__
    text = str(err).splitlines()[0] if str(err) else ""
    return f"{type(err).__name__}: {text}"


def full_errors() -> bool:
    return os.environ.get("HYDRA_FULL_ERROR") == "1"


def error_line(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}" if not isinstance(err, ConfigError) else str(err)


def run_in_sweep(cfg: DictConfig, run_dir: str | os.PathLike) -> dict | None:
    """``run`` for one job of a sweep: an error is printed (with its traceback unless it is an expected one, and
    always with ``HYDRA_FULL_ERROR=1``; ``run`` has recorded the run as ``failed`` with the reason), so the other
    runs of the sweep go on. Ctrl-C ends the sweep (the run is recorded ``interrupted``)."""
    import traceback

    try:
        return run(cfg, run_dir)
    except DiskFull:
        raise  # every later run would fail the same way: the sweep ends with one line (run.py)
    except Exception as err:  # noqa: BLE001 - the sweep must outlive one broken run
        if full_errors() or not isinstance(err, EXPECTED_ERRORS):
            traceback.print_exc()
        print(f"[hardlinear] FAILED run in {run_dir}: {failure_reason(err)}", file=sys.stderr, flush=True)
        if not _recorded_by_this_sweep(Path(run_dir)):
            note_unrecorded_failure(run_dir, failure_reason(err))
        return None
