"""Gauge map with the decision rule as the interior point (beyond the literature; see
:mod:`hardlinear.layers.peers.gauge`): the network's ``tanh`` output ``z`` in the unit inf-ball of the free
coordinates is mapped onto the whole feasible set ``C(x)`` around the rule's output ``y0(x)``, trained on the
objective. Every output is feasible for inputs in the box; unlike the proposed blend, feasible network outputs
are moved too (the map is a bijection, not a correction).

Does not apply (``NotApplicable``) where ``G`` depends on the input (no continuous null-space basis: the
portfolio's standard form), where no free dimension is left, or where the feasible set is unbounded in the free
coordinates and no ``radius`` is given. Uses the proposed method's rule (same solver, cache and margin checks).
"""

from __future__ import annotations

import time

import torch

from hardlinear.layers.network import run_net
from hardlinear.methods.base import Context, Method, Prediction, check_dtype
from hardlinear.methods.ldr import check_device_option, load_rule


class Gauge(Method):
    name = "gauge"
    pretrain = False

    def __init__(
        self,
        name: str = "gauge",
        rule_solver: str = "auto",
        layer_dtype: str = "float64",
        require_positive_margin: bool = True,
        margin: float = 1e-9,
        radius: float | None = None,
        rule_device: str = "cpu",
    ) -> None:
        super().__init__()
        self.name, self.rule_solver, self.layer_dtype = name, rule_solver, check_dtype(layer_dtype)
        self.require_positive_margin = bool(require_positive_margin)
        self.margin, self.radius = float(margin), radius
        self.rule_device = check_device_option(rule_device, rule_solver)
        self.t_star = float("nan")

    def setup(self, problem, ctx: Context) -> float:
        from hardlinear.layers.peers.gauge import GaugeMap
        from hardlinear.layers.peers.reduced import ReducedInequalities

        self.problem = problem
        ReducedInequalities(problem.family, "the gauge map")  # NotApplicable before the rule's solve
        self.rule, offline = load_rule(
            problem, ctx, self.rule_solver, self.require_positive_margin, self.layer_dtype, rule_device=self.rule_device
        )
        self.t_star = float(self.rule.t_star)
        t0 = time.perf_counter()
        self.layer = GaugeMap(problem.family, self.rule, self.margin, self.radius, generator=ctx.generator(offset=59))
        offline += time.perf_counter() - t0
        self.layer.to(ctx.device)
        self.net = ctx.make_mlp(problem.box, self.layer.d).to(ctx.device, ctx.dtype)
        return offline

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k) -> y: (B, n)`` in ``layer_dtype``."""
        z = torch.tanh(run_net(self.net, xi).to(self.layer_dtype))
        return self.layer(xi.to(self.layer_dtype), z)

    @torch.no_grad()
    def predict(self, xi: torch.Tensor) -> Prediction:
        y = self(xi)
        return Prediction(
            y=y, iterations=torch.ones(xi.shape[0], dtype=torch.long, device=y.device), extras=self.layer.last_stats
        )
