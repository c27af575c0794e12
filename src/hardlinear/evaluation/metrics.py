"""The paper's metrics (its appendix), always evaluated in float64 (DESIGN.md section 4).

Keys are ``split/metric`` and are spelled the same in ``metrics.json``, the results CSV, W&B and the tables.
"""

from __future__ import annotations

import numpy as np
import torch

FEASIBILITY_TOL = 1e-6
"""Worst equality or inequality violation (the paper's relative norms) above which a run is marked infeasible (the
study table, the ``done`` line, W&B's summary): far above float64 rounding (~1e-15) and the float32 layer's ~1e-7,
far below what a soft method leaves."""


def infeasibility(metrics: dict) -> str:
    """``""`` for a run whose worst test violations stay within ``FEASIBILITY_TOL``, else why it is infeasible (the
    same rule as the study table's Feasible column), e.g. ``"INFEASIBLE: worst ineq. violation 2.8e-02 > 1e-06"``."""
    worst = {name: float(metrics.get(f"test/{key}_viol_worst", float("nan"))) for name, key in (("eq.", "eq"), ("ineq.", "ineq"))}
    over = [f"worst {name} violation {value:.1e}" for name, value in worst.items() if value > FEASIBILITY_TOL]
    return f"INFEASIBLE: {', '.join(over)} > {FEASIBILITY_TOL:g}" if over else ""


METRIC_KEYS = (
    "gap_mean",
    "gap_worst",
    "eq_viol_mean",
    "eq_viol_worst",
    "ineq_viol_mean",
    "ineq_viol_worst",
    "max_abs_viol",
)


@torch.no_grad()
def instance_metrics(problem, xi: torch.Tensor, y: torch.Tensor, y_opt_objective: torch.Tensor | np.ndarray) -> dict[str, np.ndarray]:
    """Per-instance gap (percent), relative equality and inequality violations, max absolute violation.

    ``xi: (B, k), y: (B, n), y_opt_objective: (B,)``; everything is cast to float64 first. A prediction that
    is not finite gets NaN metrics, which the aggregates below report as NaN rather than hide.
    """
    xi = xi.detach().to("cpu", torch.float64)
    y = y.detach().to("cpu", torch.float64)
    f_opt = torch.as_tensor(np.asarray(y_opt_objective), dtype=torch.float64)
    f = problem.objective(xi, y)
    gap = 100.0 * (f - f_opt) / f_opt.abs()
    eq = problem.eq_resid(xi, y)
    ineq = problem.ineq_resid(xi, y)
    g = problem.family.eq_rhs(xi)
    h = problem.family.ineq_rhs(xi)
    eq_rel = eq.norm(dim=1) / (1.0 + g.norm(dim=1))
    ineq_pos = ineq.clamp(min=0.0)
    ineq_rel = ineq_pos.norm(dim=1) / (1.0 + h.norm(dim=1))
    zeros = torch.zeros_like(f)
    eq_max = eq.abs().amax(dim=1) if eq.shape[1] else zeros
    ineq_max = ineq_pos.amax(dim=1) if ineq.shape[1] else zeros
    max_abs = torch.maximum(eq_max, ineq_max)
    return {
        "gap": gap.numpy(),
        "eq_viol": eq_rel.numpy(),
        "ineq_viol": ineq_rel.numpy(),
        "max_abs_viol": max_abs.numpy(),
        "objective": f.numpy(),
        "eq_max": eq_max.numpy(),
        "ineq_max": ineq_max.numpy(),
    }


def summarize(per_instance: dict[str, np.ndarray], split: str = "test") -> dict[str, float]:
    """Mean and worst over the instances, under ``split/`` keys. Worst gap is the largest (signed) gap."""
    out: dict[str, float] = {}
    for name in ("gap", "eq_viol", "ineq_viol"):
        values = per_instance[name]
        out[f"{split}/{name}_mean"] = float(np.mean(values)) if len(values) else float("nan")
        out[f"{split}/{name}_worst"] = float(np.max(values)) if len(values) else float("nan")
    out[f"{split}/max_abs_viol"] = float(np.max(per_instance["max_abs_viol"])) if len(per_instance["max_abs_viol"]) else float("nan")
    # DC3's own statistics (its tables): the mean objective and the means over instances of each instance's
    # largest absolute equality and inequality violation ("Max eq.", "Max ineq.").
    for name in ("objective", "eq_max", "ineq_max"):
        if name in per_instance:
            values = per_instance[name]
            out[f"{split}/{name}_mean"] = float(np.mean(values)) if len(values) else float("nan")
    return out


def evaluate(problem, xi: torch.Tensor, y: torch.Tensor, y_opt_objective, split: str = "test") -> dict[str, float]:
    """Aggregated metrics of predictions ``y`` on inputs ``xi``."""
    return summarize(instance_metrics(problem, xi, y, y_opt_objective), split)
