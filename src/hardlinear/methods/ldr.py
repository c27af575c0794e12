"""The decision rule alone (the paper's LDR baseline): feasible by construction, nothing trained."""

from __future__ import annotations

import time

import torch

from hardlinear.methods.base import Context, Method

DTYPES = {"float32": torch.float32, "float64": torch.float64}


class LDR(Method):
    name = "ldr"
    trainable = False

    def __init__(self, name: str = "ldr", rule_solver: str = "auto", layer_dtype: str = "float64") -> None:
        super().__init__()
        if layer_dtype not in DTYPES:
            raise ValueError(f"layer_dtype must be one of {sorted(DTYPES)}; got {layer_dtype!r}")
        self.name, self.rule_solver, self.layer_dtype = name, rule_solver, DTYPES[layer_dtype]
        self.t_star = float("nan")

    def setup(self, problem, ctx: Context) -> float:
        from hardlinear.layers.decision_rule import solve_decision_rule

        self.problem = problem
        t0 = time.perf_counter()
        rule = solve_decision_rule(problem, solver=self.rule_solver, cache_dir=ctx.cache_dir)
        offline = time.perf_counter() - t0
        self.t_star = float(rule.t_star)
        self.rule = rule.to(ctx.device, self.layer_dtype)
        return offline

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        return self.rule(xi.to(self.layer_dtype))
