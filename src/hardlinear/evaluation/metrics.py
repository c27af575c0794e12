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
    nonfinite = nonfinite_text(metrics)
    if nonfinite:
        return f"INFEASIBLE: {nonfinite}"
    return f"INFEASIBLE: {', '.join(over)} > {FEASIBILITY_TOL:g}" if over else ""


def nonfinite_text(metrics: dict, split: str = "test") -> str:
    """``"non-finite outputs (NaN or inf) on 3 test instances"``, or ``""`` when every output was finite."""
    count = float(metrics.get(f"{split}/nonfinite", 0.0) or 0.0)
    if count != count or count <= 0:  # NaN: not recorded
        return ""
    return f"non-finite outputs (NaN or inf) on {count:.0f} {split} instance{'s' if count != 1 else ''}"


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
    is not finite gets NaN metrics, which the aggregates below report as NaN rather than hide, and is counted
    (``nonfinite``: 1 for an instance whose output holds a NaN or an inf).
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
        "nonfinite": (~torch.isfinite(y).all(dim=1)).double().numpy(),  # counted, never hidden in a NaN mean
        "gap": gap.numpy(),
        "eq_viol": eq_rel.numpy(),
        "ineq_viol": ineq_rel.numpy(),
        "max_abs_viol": max_abs.numpy(),
        "objective": f.numpy(),
        "eq_max": eq_max.numpy(),
        "ineq_max": ineq_max.numpy(),
    }


SGM_SHIFT = 1.0
"""The shift of the gap's shifted geometric mean, in percent: 1 %, as Chen, Tanneau and Van Hentenryck report their
economic-dispatch gaps ("End-to-End Feasible Optimization Proxies for Large-Scale Economic Dispatch", IEEE TPWRS
2024, arXiv 2304.11726v2, its tables of gaps): ``exp(mean(log(gap + 1))) - 1`` with the gaps in percent."""
GAP_PERCENTILES = {"median": 50.0, "p95": 95.0, "p99": 99.0}
"""The gap's quantiles every record carries beside its mean and worst (``test/gap_median`` ...): the tails by which
proxies are now judged (Chen et al., "Compact Optimality Verification for Optimization Proxies", ICML 2024)."""


def shifted_geometric_mean(values: np.ndarray, shift: float = SGM_SHIFT) -> float:
    """``exp(mean(log(values + shift))) - shift``: a mean of gaps (percent) that a few large ones do not dominate
    and that tiny ones do not drive to zero (the shift). NaN when there are no values, any is NaN, or any is at or
    below ``-shift`` (a soft method's objective below the optimum by ``shift`` percent or more: the logarithm is
    undefined there, and no figure is better than a made-up one)."""
    values = np.asarray(values, dtype=np.float64)
    if not len(values) or not bool(np.all(values > -shift)):
        return float("nan")
    return float(shift * np.expm1(np.mean(np.log1p(values / shift))))  # the same, accurate for gaps near 0


def gap_statistics(gap: np.ndarray, split: str = "test") -> dict[str, float]:
    """The gap's shifted geometric mean (``SGM_SHIFT``), median, 95th and 99th percentiles (linear interpolation,
    numpy's default) under ``split/gap_*`` keys; the mean and the worst (the max) are :func:`summarize`'s."""
    gap = np.asarray(gap, dtype=np.float64)
    out = {f"{split}/gap_sgm": shifted_geometric_mean(gap)}
    for name, q in GAP_PERCENTILES.items():
        out[f"{split}/gap_{name}"] = float(np.percentile(gap, q)) if len(gap) else float("nan")
    return out


def summarize(per_instance: dict[str, np.ndarray], split: str = "test") -> dict[str, float]:
    """Mean and worst over the instances, under ``split/`` keys, and the gap's statistics (:func:`gap_statistics`).
    Worst gap is the largest (signed) gap."""
    out: dict[str, float] = {}
    for name in ("gap", "eq_viol", "ineq_viol"):
        values = per_instance[name]
        out[f"{split}/{name}_mean"] = float(np.mean(values)) if len(values) else float("nan")
        out[f"{split}/{name}_worst"] = float(np.max(values)) if len(values) else float("nan")
    out.update(gap_statistics(per_instance["gap"], split))
    out[f"{split}/max_abs_viol"] = float(np.max(per_instance["max_abs_viol"])) if len(per_instance["max_abs_viol"]) else float("nan")
    if "nonfinite" in per_instance:  # instances whose output holds NaN or inf (the method's, not the metrics')
        out[f"{split}/nonfinite"] = float(np.sum(per_instance["nonfinite"]))
    # DC3's own statistics (its tables): the mean objective and the means over instances of each instance's
    # largest absolute equality and inequality violation ("Max eq.", "Max ineq.").
    for name in ("objective", "eq_max", "ineq_max"):
        if name in per_instance:
            values = per_instance[name]
            out[f"{split}/{name}_mean"] = float(np.mean(values)) if len(values) else float("nan")
    return out


PER_INSTANCE_COLUMNS = ("gap", "eq_viol", "ineq_viol", "max_abs_viol", "eq_max", "ineq_max", "objective", "ref_objective")
"""The columns of :func:`per_instance_csv` after ``instance``: the gap (percent), the relative equality and
inequality violations (the paper's norms), the largest absolute violation overall and of each kind, the objective and
the reference solver's objective."""


def per_instance_csv(per_instance: dict[str, np.ndarray]) -> bytes:
    """The per-instance metrics as CSV text, one row per instance in the test set's order, every float written to
    round-trip (``repr``): what the record's statistics were computed from, for tails and tests the record does not
    carry. ``per_instance`` is :func:`instance_metrics`'s, with ``ref_objective`` added."""
    import csv
    import io

    columns = [c for c in PER_INSTANCE_COLUMNS if c in per_instance]
    rows = len(per_instance["gap"])
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["instance", *columns])
    arrays = [np.asarray(per_instance[c], dtype=np.float64) for c in columns]
    for i in range(rows):
        writer.writerow([i, *(repr(float(a[i])) for a in arrays)])
    return buf.getvalue().encode()


def evaluate(problem, xi: torch.Tensor, y: torch.Tensor, y_opt_objective, split: str = "test") -> dict[str, float]:
    """Aggregated metrics of predictions ``y`` on inputs ``xi``."""
    return summarize(instance_metrics(problem, xi, y, y_opt_objective), split)
