"""The paper's method: task network, equality projection, blend with the decision rule by the smallest alpha.

The task network runs in the trainer's dtype (float32 by default); the feasibility layer and its output run in
``layer_dtype`` (float64 by default), so the reported feasibility is that of float64 arithmetic: the blend
leaves the most violated row exactly at its bound, and in float32 rounding alone crosses it.
"""

from __future__ import annotations

import time

import torch

from hardlinear.methods.base import Context, Method, Prediction

DTYPES = {"float32": torch.float32, "float64": torch.float64}


class Proposed(Method):
    name = "proposed"

    def __init__(
        self,
        name: str = "proposed",
        gradient: str = "argmax",
        rule_solver: str = "auto",
        layer_dtype: str = "float64",
        pretrain: bool = True,
        out_of_domain: str = "warn",
    ) -> None:
        super().__init__()
        if layer_dtype not in DTYPES:
            raise ValueError(f"layer_dtype must be one of {sorted(DTYPES)}; got {layer_dtype!r}")
        self.name, self.gradient, self.rule_solver = name, gradient, rule_solver
        self.layer_dtype = DTYPES[layer_dtype]
        self.pretrain, self.out_of_domain = pretrain, out_of_domain
        self.t_star = float("nan")

    def setup(self, problem, ctx: Context) -> float:
        from hardlinear.layers.decision_rule import solve_decision_rule
        from hardlinear.layers.feasibility import FeasibilityLayer

        self.problem = problem
        t0 = time.perf_counter()
        rule = solve_decision_rule(problem, solver=self.rule_solver, cache_dir=ctx.cache_dir)
        offline = time.perf_counter() - t0
        self.t_star = float(rule.t_star)
        self.rule = rule.to(ctx.device, self.layer_dtype)
        self.net = ctx.make_mlp(problem.box, problem.n).to(ctx.device, ctx.dtype)
        self.layer = FeasibilityLayer(problem.family, self.rule, gradient=self.gradient).to(ctx.device)
        return offline

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        return self.layer(xi.to(self.layer_dtype), self.net(xi).to(self.layer_dtype))

    def regress(self, xi: torch.Tensor) -> torch.Tensor:
        return self.net(xi)

    def pretrain_target(self, xi: torch.Tensor) -> torch.Tensor | None:
        return self.rule(xi.to(self.layer_dtype)) if self.pretrain else None

    @torch.no_grad()
    def predict(self, xi: torch.Tensor) -> Prediction:
        y = self(xi)
        stats = getattr(self.layer, "last_stats", {}) or {}
        extras = {k: stats[k] for k in ("alpha", "out_of_domain") if k in stats}
        return Prediction(y=y, iterations=torch.ones(xi.shape[0], dtype=torch.long, device=y.device), extras=extras)

    def describe(self) -> dict[str, str]:
        return {"variant": "" if self.gradient == "argmax" else f"gradient={self.gradient}"}
