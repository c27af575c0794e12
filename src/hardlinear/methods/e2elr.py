"""E2ELR (Chen, Tanneau, Van Hentenryck, "End-to-End Feasible Optimization Proxies for Large-Scale Economic
Dispatch", IEEE TPWRS 2024; ``AI4OPT/ML4OPF`` ``ml4opf/models/e2elr``): a network predicts the dispatch, a bound
repair puts it in the generator limits, a proportional-response repair meets the demand
(:mod:`hardlinear.layers.peers.e2elr`), and the thermal limits are soft: the slack is the smallest that makes each
line row hold, ``max(|pf| - smax, 0)``, paid at the problem's thermal penalty. Trained self-supervised on the
objective, which holds that penalty (no labels).

Applies to ``problem=ed`` only (it needs the dispatch's structure: generator bounds, one balance row, the PTDF
flows); ``setup`` raises NotApplicable elsewhere. Promise: balance to rounding and bounds exactly, in float64, for
every demand within ``[sum pmin, sum pmax]``; the line rows hold through the slack.
"""

from __future__ import annotations

import torch

from hardlinear.layers.network import run_net
from hardlinear.layers.peers.e2elr import BOUND_REPAIRS, bound_repair, proportional_response
from hardlinear.methods.base import Context, Method, NotApplicable, Prediction, check_dtype


class E2ELR(Method):
    name = "e2elr"
    pretrain = False

    def __init__(self, name: str = "e2elr", bound_repair: str = "sigmoid", layer_dtype: str = "float64") -> None:
        super().__init__()
        if bound_repair not in BOUND_REPAIRS:
            raise ValueError(f"bound_repair must be one of {BOUND_REPAIRS}; got {bound_repair!r}")
        self.name, self.bound_repair = name, bound_repair
        self.layer_dtype = check_dtype(layer_dtype)

    def setup(self, problem, ctx: Context) -> float:
        if not hasattr(problem, "thermal_slack"):
            raise NotApplicable(
                f"E2ELR repairs an economic dispatch (generator bounds, one power balance, PTDF line flows); "
                f"{problem.name} is not one: run it with problem=ed"
            )
        self.problem = problem
        net = problem.network
        self.register_buffer("pmin", torch.as_tensor(net.pmin, dtype=self.layer_dtype, device=ctx.device))
        self.register_buffer("pmax", torch.as_tensor(net.pmax, dtype=self.layer_dtype, device=ctx.device))
        self.net = ctx.make_mlp(problem.box, len(net.gen_bus)).to(ctx.device, ctx.dtype)
        self.last_stats: dict = {}
        return 0.0

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k) -> y: (B, n)`` in the problem's form, ``layer_dtype``."""
        xi64 = xi.to(self.layer_dtype)
        pg = bound_repair(run_net(self.net, xi).to(self.layer_dtype), self.pmin, self.pmax, self.bound_repair)
        pg, ratio = proportional_response(pg, self.problem.loads(xi64).sum(dim=1), self.pmin, self.pmax)
        eager = not torch.is_grad_enabled() and not torch.compiler.is_exporting()  # an exported program returns y alone
        self.last_stats = {"repair_ratio_mean": float(ratio.mean())} if eager else {}
        return self.problem.with_thermal_slack(xi64, pg)

    @torch.no_grad()
    def predict(self, xi: torch.Tensor) -> Prediction:
        y = self(xi)
        return Prediction(y=y, iterations=torch.ones(xi.shape[0], dtype=torch.long, device=y.device), extras=self.last_stats)
