"""The public facade: one's own constraints to a feasible layer in two calls.

    constraints = hardlinear.LinearConstraints(lo, hi, G=G, g=(g0, Gx), H=H, h=(h0, Hx))
    layer = hardlinear.feasibility_layer(constraints, cache_dir="cache")
    y = layer(theta, net(theta))          # feasible for every theta in the input set

:class:`~hardlinear.problems.user.LinearConstraints` checks and holds the matrices; this module only joins
the offline rule (:mod:`hardlinear.rules`) to the online layer (:mod:`hardlinear.layers`). Nothing below it
imports it.
"""

from __future__ import annotations

import os
from typing import Any

from hardlinear.constraints.family import ConstraintFamily
from hardlinear.problems.user import LinearConstraints, as_rule_target

__all__ = ["LinearConstraints", "as_rule_target", "feasibility_layer"]


def feasibility_layer(
    constraints: LinearConstraints | ConstraintFamily | Any,
    cache_dir: str | os.PathLike | None = None,
    *,
    solver: str = "auto",
    rule_objective: str = "auto",
    margin_fraction: float = 0.5,
    max_margin: float | str | None = "auto",
    gradient: str = "argmax",
    progress: bool = True,
    out_of_domain: str = "warn_once",
    warn_low_precision: bool = True,
):
    """Solve (or load from ``cache_dir``) the decision rule of ``constraints`` and return the layer
    ``layer(theta: (B, k), y_task: (B, n)) -> y: (B, n)``, feasible for every ``theta`` in the box.

    The rule is verified in float64 after solving (``layer.safe.t_star``: its worst slack over the box). Raises
    :class:`~hardlinear.rules.decision_rule.DecisionRuleInfeasible` when no rule with a positive margin exists
    (the message names the binding row and the largest box, shrunk about its centre, for which one does).
    ``rule_objective="auto"`` (the default): the cost-aware rule when the constraints carry an objective (``c``,
    ``Q``): it kept half the margin and cut the LDR's gap on every paper problem (docs/cost_aware_rule.md); the
    paper's margin rule otherwise. Other options as in :func:`~hardlinear.rules.decision_rule.solve_decision_rule`.

    The output has ``y_task``'s dtype: a float32 network's output comes back float32, its equalities holding to
    float32 rounding (~1e-7 relative) rather than ~1e-15; the layer warns once then (``warn_low_precision=False``
    silences it). Pass ``y_task.double()`` for float64 outputs.

    Inputs outside the box (or the input polytope) have no guarantee: the layer warns at the first call that has
    some (``out_of_domain="warn_once"``, the default), and ``layer.last_stats["out_of_domain"]`` flags them per
    row; ``"warn"`` warns every call, ``"error"`` refuses them, ``"count"`` only flags them.
    """
    from hardlinear.layers.feasibility import FeasibilityLayer
    from hardlinear.rules.decision_rule import solve_decision_rule

    target = as_rule_target(constraints)
    if rule_objective == "auto":
        rule_objective = "cost" if getattr(target, "objective_data", None) is not None else "margin"
    rule = solve_decision_rule(
        target, solver=solver, cache_dir=cache_dir, rule_objective=rule_objective, margin_fraction=margin_fraction,
        max_margin=max_margin, progress=progress,
    )
    return FeasibilityLayer(target.family, rule, gradient=gradient, out_of_domain=out_of_domain,
                            warn_low_precision=warn_low_precision)
