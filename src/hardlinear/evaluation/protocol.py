"""Test-set evaluation: the paper's metrics in float64 and the timing protocol (DESIGN.md section 4).

Timing protocol:
* ``test/time_ms``: mean wall milliseconds per instance, passing the test instances one at a time (batch 1),
  after ``warmup`` untimed calls, synchronising CUDA around each call when the method runs on a GPU. Methods
  that report their own per-instance solver time (``Prediction.extras["time_s"]``, the optimizer) use it, as
  the paper reports the solver's time.
* ``test/throughput``: instances per second of one call on a batch of ``throughput_batch`` fresh inputs;
  for methods that cannot batch (``method.batched`` False: per-instance solvers) it is ``1000 / time_ms``.
* ``test/iterations``: mean correction iterations on the test set (1 for one-shot methods).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from hardlinear.evaluation.metrics import instance_metrics, summarize
from hardlinear.methods.base import Context, Method
from hardlinear.problems.datasets import Dataset


@dataclass
class EvalConfig:
    warmup: int = 10
    """Untimed calls before the batch-1 timing."""
    time_instances: int | None = None
    """Time only the first N test instances at batch 1 (None: all of them)."""
    throughput_batch: int = 4096
    """Batch size of the throughput measurement (>= 1; the config rejects 0, and a 0 given here directly records
    NaN, never the batch-1 rate)."""
    diverged_gap: float = 1.0e7
    """A run whose test gap (mean or worst, in percent, absolute value) exceeds this is recorded ``diverged``.
    Why so high: a soft method stuck infeasible legitimately reaches gaps of -1.6e5 % (the paper study's
    portfolio penalty and ALM runs); a blown-up run reaches 1e14 %."""
    diverged_viol: float = 1.0e5
    """... or whose worst equality or inequality violation (the paper's relative norms) exceeds this (the paper
    study's largest is 2.1e3, DC3 at penalty 0 on the portfolio; a blown-up run reaches 6e13)."""


DIVERGENCE_METRICS = (
    "test/gap_mean", "test/gap_worst", "test/eq_viol_mean", "test/eq_viol_worst", "test/ineq_viol_mean", "test/ineq_viol_worst",
)


def divergence_reason(metrics: dict[str, float], cfg: EvalConfig) -> str | None:
    """Why a run's test metrics are not a result (non-finite, or beyond ``cfg.diverged_gap`` /
    ``cfg.diverged_viol``), or None when they are sane. Why: a run that blew up to huge but finite values
    (a gap of 1e14 %) must not pass for a row of a table."""
    from hardlinear.evaluation.metrics import nonfinite_text

    outputs = nonfinite_text(metrics)
    if outputs:  # the method returned NaN or inf: said as such, not only as NaN metrics
        return f"the method returned {outputs}"
    bad = [k for k in DIVERGENCE_METRICS if k in metrics and not math.isfinite(float(metrics[k]))]
    if bad:
        return f"non-finite test metrics ({', '.join(f'{k}={metrics[k]}' for k in bad)})"
    gap = max(abs(float(metrics.get(k, 0.0))) for k in ("test/gap_mean", "test/gap_worst"))
    if gap > cfg.diverged_gap:
        return f"test gap {gap:.3g} % beyond eval.diverged_gap={cfg.diverged_gap:g}"
    viol = max(float(metrics.get(k, 0.0)) for k in ("test/eq_viol_worst", "test/ineq_viol_worst"))
    if viol > cfg.diverged_viol:
        return f"test violation {viol:.3g} beyond eval.diverged_viol={cfg.diverged_viol:g}"
    return None


def _sync(device: str) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def time_batch1(method: Method, xi: torch.Tensor, cfg: EvalConfig, device: str) -> tuple[float, np.ndarray | None]:
    """Mean milliseconds per instance at batch 1, and the method's own per-instance times if it reports them."""
    n = xi.shape[0] if cfg.time_instances is None else min(cfg.time_instances, xi.shape[0])
    for i in range(min(cfg.warmup, n)):
        method.predict(xi[i : i + 1])
    _sync(device)
    walls, own = [], []
    for i in range(n):
        _sync(device)
        t0 = time.perf_counter()
        pred = method.predict(xi[i : i + 1])
        _sync(device)
        walls.append(time.perf_counter() - t0)
        if "time_s" in pred.extras:
            own.append(float(np.sum(pred.extras["time_s"])))
    own_arr = np.array(own) if len(own) == n else None
    ms = 1000.0 * (own_arr.mean() if own_arr is not None else float(np.mean(walls)))
    return float(ms), own_arr


def throughput(method: Method, problem, ctx: Context, cfg: EvalConfig, time_ms: float) -> float:
    if not method.batched:
        return 1000.0 / time_ms if time_ms > 0 else float("nan")
    if cfg.throughput_batch <= 0:
        return float("nan")  # not measured: a batch-1 rate in this column would read as a batched one
    xi = problem.sample(cfg.throughput_batch, generator=ctx.generator(offset=31)).to(ctx.device, torch.float64)
    method.predict(xi[: min(64, len(xi))])
    _sync(ctx.device)
    t0 = time.perf_counter()
    method.predict(xi)
    _sync(ctx.device)
    return cfg.throughput_batch / (time.perf_counter() - t0)


def evaluate_method(method: Method, problem, test: Dataset, ctx: Context, cfg: EvalConfig) -> dict[str, float]:
    """All ``test/...`` metrics of a set-up (and trained) method."""
    return evaluate_method_instances(method, problem, test, ctx, cfg)[0]


@torch.no_grad()
def evaluate_method_instances(method: Method, problem, test: Dataset, ctx: Context, cfg: EvalConfig) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """:func:`evaluate_method`'s metrics and the per-instance figures they summarise (``instance_metrics``'s, with
    the reference objective as ``ref_objective``): what a run writes beside its record (``per_instance.csv``)."""
    method.eval()
    # float64 inputs: each method casts them for its network, and the layers after it enforce the
    # constraints of the exact test input rather than of its float32 rounding.
    xi = test.xi.to(ctx.device, torch.float64)
    pred = method.predict(xi)
    per_instance = instance_metrics(problem, test.xi, pred.y, test.objective)
    out = summarize(per_instance, "test")
    out["test/iterations"] = float(pred.iterations.double().mean())
    alpha = pred.extras.get("alpha")
    out["test/alpha_one_frac"] = float((alpha >= 1.0).double().mean()) if alpha is not None else float("nan")
    out["test/out_of_domain"] = float(pred.extras.get("out_of_domain", torch.zeros(1)).sum())
    if "refined" in pred.extras:  # proposed with refine_pick=objective: the share of rows that kept the refined output
        out["test/refined_frac"] = float(pred.extras["refined"].double().mean())
    ms, _ = time_batch1(method, xi, cfg, ctx.device)
    out["test/time_ms"] = ms
    out["test/throughput"] = throughput(method, problem, ctx, cfg, ms)
    per_instance["ref_objective"] = np.asarray(test.objective, dtype=np.float64)
    return out, per_instance
