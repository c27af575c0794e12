"""The decision rule alone (the paper's LDR baseline): feasible by construction, nothing trained."""

from __future__ import annotations

import time

import torch

from hardlinear.methods.base import Context, Method, check_dtype
from hardlinear.rules.checks import output_dtype_for


def load_rule(
    problem, ctx: Context, solver: str, require_positive_margin: bool, dtype: torch.dtype,
    rule_objective: str = "margin", margin_fraction: float = 0.5, rule_device: str = "cpu",
):
    """Solve (or load from the cache) the problem's decision rule; returns ``(rule on ctx.device, seconds)``.

    ``require_positive_margin=False`` accepts a rule whose margin ``t*`` is zero up to the solver's accuracy
    (the paper's portfolio at uncertainty 0.4, ``t* ~ -7e-9``), with a warning: such a rule can miss an
    inequality by about ``|t*|`` at the box vertex that binds, so the guarantee then holds to that level.
    ``rule_objective="cost"``: the cost-aware rule (keeps ``t >= margin_fraction * t*``, minimises the expected
    objective over the box; docs/cost_aware_rule.md). ``rule_device``: where the "reduced" solver runs.
    ``ctx.given_rule`` (a reloaded checkpoint's rule): verified against the problem
    (:func:`~hardlinear.rules.checks.check_given_rule`, no program solved) and used; nothing is solved or cached.
    """
    from hardlinear.rules.decision_rule import solve_decision_rule

    t0 = time.perf_counter()
    given = getattr(ctx, "given_rule", None)
    if given is not None:
        from hardlinear.rules.checks import check_given_rule
        from hardlinear.rules.decision_rule import WEAK_MARGIN

        check_given_rule(problem, given, 0.0 if require_positive_margin else -WEAK_MARGIN)
        return given.to(ctx.device, dtype), time.perf_counter() - t0
    rule = solve_decision_rule(
        problem, solver=solver, cache_dir=ctx.cache_dir, require_positive_margin=require_positive_margin,
        rule_objective=rule_objective, margin_fraction=margin_fraction, progress=bool(getattr(ctx, "progress", True)),
        device=rule_device,
    )
    return rule.to(ctx.device, dtype), time.perf_counter() - t0


class LDR(Method):
    name = "ldr"
    trainable = False

    def __init__(
        self,
        name: str = "ldr",
        rule_solver: str = "auto",
        layer_dtype: str = "float64",
        require_positive_margin: bool = True,
        rule_objective: str = "margin",
        rule_margin_fraction: float = 0.5,
        rule_device: str = "cpu",
    ) -> None:
        super().__init__()
        self.name, self.rule_solver, self.layer_dtype = name, rule_solver, check_dtype(layer_dtype)
        self.require_positive_margin = bool(require_positive_margin)
        self.rule_objective, self.rule_margin_fraction = check_rule_options(rule_objective, rule_margin_fraction)
        self.rule_device = check_device_option(rule_device, rule_solver)
        self.t_star = float("nan")

    def setup(self, problem, ctx: Context) -> float:
        self.problem = problem
        self.rule, offline = load_rule(
            problem, ctx, self.rule_solver, self.require_positive_margin, self.layer_dtype,
            self.rule_objective, self.rule_margin_fraction, self.rule_device,
        )
        self.t_star = float(self.rule.t_star)
        self.layer_dtype = output_dtype_for(problem, self.rule, self.layer_dtype, self.name)
        return offline

    def describe(self) -> dict[str, str]:
        return {"variant": rule_variant(self.rule_objective, self.rule_margin_fraction)}

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        return self.rule(xi.to(self.layer_dtype))


def check_rule_options(rule_objective: str, fraction: float) -> tuple[str, float]:
    """Validate the rule's objective options at construction, before any solving."""
    from hardlinear.rules.cost import RULE_OBJECTIVES

    if rule_objective not in RULE_OBJECTIVES:
        raise ValueError(f"rule_objective must be one of {RULE_OBJECTIVES}; got {rule_objective!r}")
    fraction = float(fraction)
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"rule_margin_fraction must be in [0, 1] (the cost rule keeps t >= fraction * t*); got {fraction}")
    return rule_objective, fraction


def check_device_option(rule_device: str, rule_solver: str) -> str:
    """Validate ``rule_device`` at construction (see :func:`~hardlinear.rules.decision_rule.check_rule_device`)."""
    from hardlinear.rules.decision_rule import check_rule_device

    check_rule_device(rule_device, rule_solver)
    return rule_device


def rule_variant(rule_objective: str, fraction: float) -> str:
    """The results row's ``variant`` for a rule objective ("" for the paper's margin rule)."""
    return f"rule=cost{fraction:g}" if rule_objective == "cost" else ""
