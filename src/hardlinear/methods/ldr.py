"""The decision rule alone (the paper's LDR baseline): feasible by construction, nothing trained."""

from __future__ import annotations

import time

import torch

from hardlinear.layers.rule_checks import output_dtype_for
from hardlinear.methods.base import Context, Method, check_dtype


def load_rule(problem, ctx: Context, solver: str, require_positive_margin: bool, dtype: torch.dtype):
    """Solve (or load from the cache) the problem's decision rule; returns ``(rule on ctx.device, seconds)``.

    ``require_positive_margin=False`` accepts a rule whose margin ``t*`` is zero up to the solver's accuracy
    (the paper's portfolio at uncertainty 0.4, ``t* ~ -7e-9``), with a warning: such a rule can miss an
    inequality by about ``|t*|`` at the box vertex that binds, so the guarantee then holds to that level.
    """
    from hardlinear.layers.decision_rule import solve_decision_rule

    t0 = time.perf_counter()
    rule = solve_decision_rule(
        problem, solver=solver, cache_dir=ctx.cache_dir, require_positive_margin=require_positive_margin
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
    ) -> None:
        super().__init__()
        self.name, self.rule_solver, self.layer_dtype = name, rule_solver, check_dtype(layer_dtype)
        self.require_positive_margin = bool(require_positive_margin)
        self.t_star = float("nan")

    def setup(self, problem, ctx: Context) -> float:
        self.problem = problem
        self.rule, offline = load_rule(problem, ctx, self.rule_solver, self.require_positive_margin, self.layer_dtype)
        self.t_star = float(self.rule.t_star)
        self.layer_dtype = output_dtype_for(problem, self.rule, self.layer_dtype, self.name)
        return offline

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        return self.rule(xi.to(self.layer_dtype))
