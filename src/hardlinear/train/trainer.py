"""The training loop every learned method shares; reads top to bottom.

An epoch is ``batches_per_epoch`` batches of fresh inputs drawn from the box (the paper's code), or of a fixed
training set: the problem's own training inputs where it has them (DC3's 8,334, a user's ``train_inputs``;
``train_inputs="auto"``), else ``train_size`` samples from the box. With ``sampling="pass"`` an epoch is one
shuffled pass over the fixed set in batches of ``batch_size``, the last one shorter (DC3's loop). Phases: MSE pre-training to ``method.pretrain_target`` for the first
``pretrain_epochs`` (when the method has a target), then the method's own loss; supervised methods are fit by
MSE to reference solutions throughout. The validation loss after every epoch selects the checkpoint (the
lowest of the last phase, restored at the end); the validation metrics, which run the method's whole inference
(a solver per instance for some), every ``val_every`` epochs and once more for the kept checkpoint.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from hardlinear.evaluation.metrics import evaluate
from hardlinear.methods.base import Context, Method
from hardlinear.problems.datasets import Dataset
from hardlinear.runtime.allocator import keep_large_blocks

log = logging.getLogger(__name__)


TRAIN_INPUTS = ("auto", "box")
SAMPLINGS = ("batches", "pass")
OPTIMIZERS = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
SCHEDULES = ("constant", "cosine")


def scheduled_lr(cfg: TrainerConfig, epoch: int, first_objective_epoch: int) -> float:
    """The learning rate of ``epoch``: ``cfg.lr`` throughout for ``constant`` and in pre-training; for ``cosine``,
    ``lr (1 + cos(pi j / J)) / 2`` at the ``j``-th of the ``J`` objective-phase epochs (so the last is above 0)."""
    if cfg.schedule == "constant" or epoch < first_objective_epoch:
        return cfg.lr
    span = max(cfg.epochs - first_objective_epoch, 1)
    return 0.5 * cfg.lr * (1.0 + math.cos(math.pi * (epoch - first_objective_epoch) / span))


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


@dataclass
class TrainerConfig:
    """Settings of the loop; the defaults are the paper's (its appendix)."""

    epochs: int = 300
    """Total epochs, pre-training included (paper: 300 DC-OPF, 500 portfolio)."""
    pretrain_epochs: int = 100
    """Epochs of MSE to the method's pre-training target (paper: 100 DC-OPF, 150 portfolio); 0 disables."""
    batches_per_epoch: int = 20
    """Batches per epoch (the paper's code draws 20 fresh batches)."""
    batch_size: int = 64
    lr: float = 1e-4
    weight_decay: float = 1e-8
    """Adam's weight decay (1e-8 in the paper's code)."""
    optimizer: str = "adam"
    """``adam`` (weight decay as an L2 term, the paper's code) or ``adamw`` (decoupled weight decay: FSNet's)."""
    train_size: int | None = None
    """None: fresh inputs every batch. An integer: a fixed training set of that size, sampled with replacement."""
    train_inputs: str = "auto"
    """``auto``: the problem's fixed training inputs when it has them (DC3's split, a file's ``train_inputs``),
    else as ``train_size`` says; ``box``: ignore them and draw from the box."""
    sampling: str = "batches"
    """``batches``: ``batches_per_epoch`` batches drawn with replacement; ``pass``: one shuffled pass over the
    fixed training set (needs one: the problem's, or ``train_size``)."""
    supervised_size: int = 10000
    """Instances solved to fit supervised methods (post-projection, the optimizer's warm start)."""
    grad_clip: float | None = None
    """Clip the gradient norm (None: no clipping, as the paper)."""
    schedule: str = "constant"
    """``constant`` (the paper's) or ``cosine``: the learning rate falls from ``lr`` to 0 along a half cosine over
    the objective phase's epochs (pre-training keeps ``lr``). Set from the epoch number at each epoch's start, so a
    resumed run follows the same schedule. Not in conf/trainer, so existing identities stay: ``+trainer.schedule``."""
    plateau_factor: float | None = None
    """Multiply the learning rate by this (in (0, 1)) once the validation loss (the one that picks the checkpoint)
    has not improved for ``plateau_patience`` epochs of the objective phase (``torch.optim.lr_scheduler.
    ReduceLROnPlateau``; E2ELR's paper: 0.1 after 10). None: no decay (the paper's constant rate). Needs
    ``schedule=constant``. Not in conf/trainer, so existing identities stay: ``+trainer.plateau_factor``."""
    plateau_patience: int = 10
    """Epochs without improvement of the validation loss before ``plateau_factor`` applies (ReduceLROnPlateau's
    ``patience``: the decay comes at the ``patience + 1``-th such epoch)."""
    early_stop_patience: int | None = None
    """Stop once the validation loss has not improved for this many epochs of the objective phase (E2ELR's paper:
    20); the kept checkpoint is the best epoch's, as always with ``keep=best``. None: run every epoch."""
    time_cap_min: float | None = None
    """Wall-clock cap of the training loop in minutes (validation included), checked at the end of each epoch:
    training stops after the first epoch that ends past it (so the cap may be passed by one epoch), and the run
    records ``train/time_capped``; every epoch it trains is whole (unlike ``time_budget_s``, which cuts the last
    epoch at a batch). E2ELR's paper: 150. None: no cap."""
    keep: str = "best"
    """``best``: the weights of the lowest validation loss; ``last``: the final weights (what a peer's script that
    tests its last epoch reports, e.g. Pinet's e662b15 runs). Not in conf/trainer, so existing identities stay."""
    time_budget_s: float | None = None
    """Wall-clock budget of the training loop in seconds (validation included), checked after every batch: once
    spent, the current epoch ends early and training stops (``TrainResult.epochs`` says how far it got). None:
    no budget, ``epochs`` decides. For methods too slow for the schedule (the end-to-end projection layer);
    part of the run's identity like every trainer key, so a budgeted run never stands in for a full one."""
    resume: str | None = None
    """A run directory whose ``last.pt`` training continues from (read by the harness, which passes its state to
    :func:`train`): the weights, the optimizer's moments, the sampling generator, the kept best checkpoint and the
    epoch, so training goes on as if it had not stopped. None: start afresh."""
    val_every: int = 1
    """Validation metrics (the method's full inference) every this many epochs and at the end; the validation
    loss, which selects the checkpoint, is computed every epoch."""
    progress: bool = True

    def __post_init__(self) -> None:
        if self.epochs < 0 or self.pretrain_epochs < 0:
            raise ValueError(f"epochs and pretrain_epochs must be >= 0; got {self.epochs}, {self.pretrain_epochs}")
        if self.pretrain_epochs > self.epochs:
            raise ValueError(f"pretrain_epochs ({self.pretrain_epochs}) cannot exceed epochs ({self.epochs})")
        if self.batch_size < 2:
            raise ValueError(f"batch_size must be >= 2 (batch normalisation); got {self.batch_size}")
        if self.time_budget_s is not None and not self.time_budget_s > 0:
            raise ValueError(f"time_budget_s must be > 0 seconds, or null for no budget; got {self.time_budget_s}")
        if self.val_every < 1:
            raise ValueError(f"val_every must be >= 1; got {self.val_every}")
        if self.keep not in ("best", "last"):
            raise ValueError(f"keep must be 'best' (lowest validation loss) or 'last' (final weights); got {self.keep!r}")
        if self.batches_per_epoch < 1 or self.lr <= 0:
            raise ValueError("batches_per_epoch must be >= 1 and lr > 0")
        if self.train_inputs not in TRAIN_INPUTS:
            raise ValueError(f"train_inputs must be one of {TRAIN_INPUTS}; got {self.train_inputs!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)}; got {self.optimizer!r}")
        if self.sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {SAMPLINGS}; got {self.sampling!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}; got {self.schedule!r}")
        if self.plateau_factor is not None and not 0.0 < self.plateau_factor < 1.0:
            raise ValueError(f"plateau_factor must be in (0, 1) (E2ELR's paper: 0.1), or null for no decay; got {self.plateau_factor}")
        if self.plateau_factor is not None and self.schedule != "constant":
            raise ValueError(f"plateau_factor decays the rate on a validation plateau and schedule={self.schedule!r} sets it every "
                             "epoch: use one or the other (schedule=constant with plateau_factor)")
        if self.plateau_patience < 0:
            raise ValueError(f"plateau_patience must be >= 0 epochs; got {self.plateau_patience}")
        if self.early_stop_patience is not None and self.early_stop_patience < 1:
            raise ValueError(f"early_stop_patience must be >= 1 epoch, or null for no early stopping; got {self.early_stop_patience}")
        if self.time_cap_min is not None and not self.time_cap_min > 0:
            raise ValueError(f"time_cap_min must be > 0 minutes, or null for no cap; got {self.time_cap_min}")


@dataclass
class TrainResult:
    time_s: float = 0.0
    best_epoch: int = -1
    best_val_loss: float = math.inf
    epochs: float = 0.0
    """Epochs trained, a fraction when a time budget ended the last one early (its batches over the epoch's)."""
    budget_spent: bool = False
    """True when ``time_budget_s`` stopped training before ``epochs``."""
    early_stopped: bool = False
    """True when ``early_stop_patience`` epochs without improvement stopped training before ``epochs``."""
    time_capped: bool = False
    """True when ``time_cap_min`` stopped training before ``epochs`` (after a whole epoch)."""
    val_time_s: float = 0.0
    """Seconds of ``time_s`` spent validating (the loss every epoch, the metrics every ``val_every``) plus the kept
    checkpoint's final validation metrics (after ``time_s``): what a sweep's time attribution separates."""
    history: list[dict] = field(default_factory=list)
    val_metrics: dict[str, float] = field(default_factory=dict)
    """Validation metrics of the kept checkpoint (what the run reports as ``val/...``)."""


def training_inputs(problem, cfg: TrainerConfig, ctx: Context) -> torch.Tensor | None:
    """The fixed training set ``(N, k)`` (float64), or None for fresh inputs every batch."""
    given = problem.inputs_for("train") if cfg.train_inputs == "auto" and hasattr(problem, "inputs_for") else None
    if given is not None:
        return torch.as_tensor(given, dtype=torch.float64)
    if cfg.train_size:
        return problem.sample(cfg.train_size, generator=ctx.generator(offset=23))
    if cfg.sampling == "pass":
        raise ValueError(
            f"trainer.sampling=pass needs a fixed training set, and {problem.name} has no training inputs: "
            "set trainer.train_size=N, or trainer.sampling=batches"
        )
    return None


def _epoch_indices(cfg: TrainerConfig, gen: torch.Generator, size: int) -> list[torch.Tensor | None]:
    """Row indices of each batch of an epoch into the fixed set of ``size`` rows (None: fresh samples)."""
    if cfg.sampling == "pass":
        order = torch.randperm(size, generator=gen)
        return [chunk for chunk in order.split(cfg.batch_size) if len(chunk) >= 2]  # batch norm needs two rows
    return [None] * cfg.batches_per_epoch


def _batch(problem, cfg: TrainerConfig, gen: torch.Generator, ctx: Context, pool: Dataset | None, fixed: torch.Tensor | None, rows: torch.Tensor | None = None):
    """One batch of inputs (and reference solutions for supervised fitting); ``rows`` picks them from the
    fixed set or the pool (one shuffled pass), else they are drawn with replacement."""
    if pool is not None:
        idx = rows if rows is not None else torch.randint(0, len(pool), (cfg.batch_size,), generator=gen)
        return pool.xi[idx].to(ctx.device, ctx.dtype), pool.y[idx].to(ctx.device, ctx.dtype)
    if fixed is not None:
        idx = rows if rows is not None else torch.randint(0, fixed.shape[0], (cfg.batch_size,), generator=gen)
        return fixed[idx].to(ctx.device, ctx.dtype), None
    return problem.sample(cfg.batch_size, generator=gen).to(ctx.device, ctx.dtype), None


def _phase_loss(method: Method, phase: str, xi: torch.Tensor, y_ref: torch.Tensor | None) -> torch.Tensor:
    if phase == "supervised":
        return method.supervised_loss(xi, y_ref)
    if phase == "pretrain":
        pred = method.regress(xi)
        with torch.no_grad():
            target = method.pretrain_target(xi)
        return F.mse_loss(pred, target.to(pred.dtype))
    return method.loss(xi, method(xi))


def train(
    method: Method,
    problem,
    val: Dataset,
    cfg: TrainerConfig,
    ctx: Context,
    loggers=None,
    supervised: Dataset | None = None,
    resume_state: dict | None = None,
    on_state: Callable[[dict], None] | None = None,
) -> TrainResult:
    """Fit ``method`` in place; returns timings and the per-epoch history.

    ``on_state(state)`` is called every ``val_every`` epochs and after the last with the loop's whole state
    (``training_state``); ``resume_state``, such a state saved by an earlier run, continues that run's training
    from the epoch after it (the harness keeps it as ``last.pt``)."""
    from tqdm.auto import tqdm

    result = TrainResult()
    if not method.trainable or cfg.epochs == 0:
        t_val = time.perf_counter()
        result.val_metrics = _val_metrics(method, problem, val, ctx)
        result.val_time_s = time.perf_counter() - t_val
        return result
    if method.supervised and supervised is None:
        raise ValueError(f"{method.name} is supervised: pass the solved training set")
    keep_large_blocks()  # large per-step temporaries: reused from the heap, not faulted in again (allocator.py)
    gen = ctx.generator(offset=17)
    fixed = training_inputs(problem, cfg, ctx)
    optimizer = OPTIMIZERS[cfg.optimizer](method.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    has_pretrain = cfg.pretrain_epochs > 0 and not method.supervised
    if has_pretrain:
        with torch.no_grad():
            has_pretrain = method.pretrain_target(problem.sample(2, generator=ctx.generator(1))) is not None
    val_xi, val_y = val.xi.to(ctx.device, ctx.dtype), val.y.to(ctx.device, ctx.dtype)
    plateau = None if cfg.plateau_factor is None else torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, mode="min", factor=cfg.plateau_factor, patience=cfg.plateau_patience)
    best_state = None
    start_epoch, time_before = 0, 0.0
    if resume_state is not None:
        start_epoch, time_before, best_state = _restore(resume_state, method, optimizer, gen, result, cfg, plateau)
    t_start = time.perf_counter() - time_before
    bar = tqdm(range(start_epoch, cfg.epochs), desc=f"train {method.name}", disable=None if (cfg.progress and ctx.progress) else True, leave=False)  # None: off when not a terminal
    for epoch in bar:
        phase = "supervised" if method.supervised else ("pretrain" if has_pretrain and epoch < cfg.pretrain_epochs else "train")
        if plateau is None or phase == "pretrain":  # on a plateau schedule the objective phase's rate is the scheduler's
            for group in optimizer.param_groups:
                group["lr"] = scheduled_lr(cfg, epoch, cfg.pretrain_epochs if has_pretrain else 0)
        # --- training ---
        method.train()
        running = 0.0
        pool = supervised if phase == "supervised" else None
        batches = _epoch_indices(cfg, gen, len(pool) if pool is not None else (fixed.shape[0] if fixed is not None else 0))
        done = 0
        for rows in batches:
            xi, y_ref = _batch(problem, cfg, gen, ctx, pool, fixed, rows)
            loss = _phase_loss(method, phase, xi, y_ref)
            if not torch.isfinite(loss):
                where = f"the best checkpoint so far is from epoch {result.best_epoch}" if result.best_epoch >= 0 else "no checkpoint was kept yet"
                raise TrainingDiverged(f"{method.name}: loss is {loss.item()} at epoch {epoch} ({phase}); {where}")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip:
                torch.nn.utils.clip_grad_norm_(method.parameters(), cfg.grad_clip)
            optimizer.step()
            running += loss.item()
            done += 1
            if cfg.time_budget_s is not None and time.perf_counter() - t_start >= cfg.time_budget_s:
                result.budget_spent = done < len(batches) or epoch < cfg.epochs - 1
                break
        result.epochs += done / len(batches)
        record = {"epoch": epoch, "phase": phase, "train/loss": running / done, "train/batches": done,
                  "train/lr": optimizer.param_groups[0]["lr"]}
        record.update({f"train/{k}": v for k, v in method.after_epoch(epoch).items()})
        # --- validation (timed apart in val_time_s): the loss every epoch (checkpoint selection), the metrics, which
        # run the method's full inference (solvers, correction loops), every `val_every` epochs and at the end ---
        t_val = time.perf_counter()
        method.eval()
        with torch.no_grad():
            val_loss = _phase_loss(method, phase, val_xi, val_y).item()
        record["val/loss"] = val_loss
        if (epoch + 1) % cfg.val_every == 0 or epoch == cfg.epochs - 1 or result.budget_spent:
            metrics = _val_metrics(method, problem, val, ctx)
            record.update(metrics)
            bar.set_postfix({"gap": f"{metrics['val/gap_mean']:.2f}%", "ineq": f"{metrics['val/ineq_viol_mean']:.1e}", "phase": phase})
        epoch_val_s = time.perf_counter() - t_val
        result.val_time_s += epoch_val_s
        record["time/val_s"] = epoch_val_s
        last_phase = phase == ("supervised" if method.supervised else "train") or not has_pretrain
        if phase == "pretrain" and epoch == cfg.pretrain_epochs - 1:
            result.best_val_loss = math.inf  # selection restarts with the objective phase
        if last_phase and val_loss < result.best_val_loss:
            result.best_val_loss, result.best_epoch = val_loss, epoch
            best_state = copy.deepcopy(method.state_dict())
        if last_phase and plateau is not None:
            plateau.step(val_loss)  # the rate of the next epoch
        if epoch < cfg.epochs - 1 and not result.budget_spent:
            _stop_early(cfg, epoch, last_phase, result, time.perf_counter() - t_start)
        stopping = result.budget_spent or result.early_stopped or result.time_capped
        result.history.append(record)
        if loggers is not None:
            loggers.log_epoch(epoch, record)
        if bar.disable and "val/gap_mean" in record and _worth_a_line(epoch, cfg, result.budget_spent):
            # no bar (a log file, progress=false): about ten lines per training; epochs.csv has every validation
            log.info("%s epoch %d/%d (%s): loss %.4g, val gap %.3f %%, val ineq viol %.2e, eq viol %.2e", method.name, epoch + 1,
                     cfg.epochs, phase, record["train/loss"], record["val/gap_mean"], record.get("val/ineq_viol_mean", math.nan),
                     record.get("val/eq_viol_mean", math.nan))
        if on_state is not None and ((epoch + 1) % cfg.val_every == 0 or epoch == cfg.epochs - 1 or stopping):
            on_state(training_state(epoch, method, optimizer, gen, result, best_state, time.perf_counter() - t_start, plateau))
        if result.budget_spent:
            log.info("%s: stopped on its budget (%.0f s) after %d of %d epochs", method.name, cfg.time_budget_s, int(result.epochs), cfg.epochs)
            break
        if result.early_stopped:
            log.info("%s: stopped early after epoch %d of %d: no better validation loss for %d epochs (best: epoch %d)",
                     method.name, epoch + 1, cfg.epochs, cfg.early_stop_patience, result.best_epoch + 1)
            break
        if result.time_capped:
            log.info("%s: time cap of %g min reached after epoch %d of %d", method.name, cfg.time_cap_min, epoch + 1, cfg.epochs)
            break
    if best_state is not None and cfg.keep == "best":
        method.load_state_dict(best_state)
    method.eval()
    result.time_s = time.perf_counter() - t_start
    t_val = time.perf_counter()
    result.val_metrics = _val_metrics(method, problem, val, ctx)  # of the kept checkpoint, not in time_s
    result.val_time_s += time.perf_counter() - t_val
    return result


def _stop_early(cfg: TrainerConfig, epoch: int, last_phase: bool, result: TrainResult, elapsed_s: float) -> None:
    """Mark ``result`` early-stopped or time-capped when ``epoch`` (0-based, not the last) ends training: the
    validation loss of the objective phase has not improved for ``early_stop_patience`` epochs, or the wall-clock
    cap has passed."""
    if cfg.early_stop_patience is not None and last_phase and result.best_epoch >= 0:
        result.early_stopped = epoch - result.best_epoch >= cfg.early_stop_patience
    if cfg.time_cap_min is not None and not result.early_stopped:
        result.time_capped = elapsed_s >= 60.0 * cfg.time_cap_min


LOG_LINES = 10
"""Validation lines a training prints without a progress bar (about): 300 epochs gave 60 lines, a screenful of
numbers before the result; every validation stays in ``epochs.csv``."""


def _worth_a_line(epoch: int, cfg: TrainerConfig, budget_spent: bool) -> bool:
    """Whether validation ``epoch`` (0-based) gets a log line: the last epoch, the end of pre-training, a budget
    spent, and every ``stride``-th epoch, ``stride`` a multiple of ``val_every`` giving about ``LOG_LINES`` lines."""
    stride = cfg.val_every * max(1, round(cfg.epochs / (LOG_LINES * cfg.val_every)))
    return (epoch + 1) % stride == 0 or epoch == cfg.epochs - 1 or epoch == cfg.pretrain_epochs - 1 or budget_spent


def training_state(epoch: int, method: Method, optimizer, gen: torch.Generator, result: TrainResult, best_state, time_s: float,
                   plateau=None) -> dict:
    """Everything the loop needs to go on after ``epoch`` (plain types and tensors: loads with ``weights_only``): with
    a plateau schedule, its counters too (the best loss it saw, the epochs without improvement)."""
    return {
        "plateau": None if plateau is None else dict(plateau.state_dict()),
        "epoch": int(epoch), "method": copy.deepcopy(method.state_dict()), "optimizer": copy.deepcopy(optimizer.state_dict()),
        "generator": gen.get_state(), "best_state": best_state, "best_epoch": int(result.best_epoch),
        "best_val_loss": float(result.best_val_loss), "epochs_done": float(result.epochs), "history": list(result.history),
        "time_s": float(time_s),
    }


def _restore(state: dict, method: Method, optimizer, gen: torch.Generator, result: TrainResult, cfg: TrainerConfig, plateau=None):
    """Put a ``training_state`` back; returns (first epoch to run, seconds already trained, the kept best state)."""
    start = int(state["epoch"]) + 1
    if start > cfg.epochs:
        raise ValueError(f"trainer.resume: the saved state is after epoch {start} but trainer.epochs is {cfg.epochs}; "
                         f"set trainer.epochs above {start - 1} to train further")
    method.load_state_dict(state["method"])
    optimizer.load_state_dict(state["optimizer"])
    gen.set_state(state["generator"])
    if plateau is not None and state.get("plateau") is not None:  # its counters; the factor and patience are this run's
        plateau.load_state_dict({**state["plateau"], "factor": cfg.plateau_factor, "patience": cfg.plateau_patience})
    result.best_epoch, result.best_val_loss = int(state["best_epoch"]), float(state["best_val_loss"])
    result.epochs, result.history = float(state["epochs_done"]), list(state["history"])
    log.info("%s: resuming training at epoch %d of %d", method.name, start + 1, cfg.epochs)
    return start, float(state["time_s"]), state["best_state"]


@torch.no_grad()
def _val_metrics(method: Method, problem, val: Dataset, ctx: Context) -> dict[str, float]:
    """The test metrics on the validation set (inputs in float64: methods cast them for their networks)."""
    pred = method.predict(val.xi.to(ctx.device, torch.float64))
    metrics = evaluate(problem, val.xi, pred.y, val.objective, split="val")
    metrics["val/iterations"] = float(pred.iterations.double().mean())
    return metrics
