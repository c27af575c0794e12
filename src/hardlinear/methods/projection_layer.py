"""End-to-end projection (OptNet / cvxpylayers): the network's output is projected onto C(x) by a
differentiable QP layer (:mod:`hardlinear.layers.peers.qp_projection`) in training and at inference, trained on the
objective of the projected point. Applies to every problem; its cost is one interior-point solve (and, in
training, one derivative) per instance, which is the finding this method is here to measure (per-epoch
training time: ``benchmarks/bench_training.py --methods projection_layer``).

Feasible up to the solver's tolerance (Clarabel: ~1e-8 absolute), not exactly.
"""

from __future__ import annotations

import time
import warnings

import torch

from hardlinear.layers.network import run_net
from hardlinear.methods.base import Context, Method, Prediction

VIOLATION_WARN = 1e-6  # a returned point whose largest residual exceeds this is reported (Clarabel: ~1e-8)


class ProjectionLayer(Method):
    name = "projection_layer"
    pretrain = False
    batched = False  # one QP per instance, serially: throughput is 1 / time per instance

    def __init__(self, name: str = "projection_layer", solve_method: str = "Clarabel", **solver_options) -> None:
        super().__init__()
        from hardlinear.layers.peers.qp_projection import solve_options
        from hardlinear.solvers.base import check_solver_options

        check_solver_options(solve_method, solver_options, solve_options(solve_method))  # no file options, ever
        self.name, self.solve_method, self.solver_options = name, solve_method, dict(solver_options)

    @classmethod
    def extra_options(cls, method: dict) -> dict:
        """The solver options this method passes on for a config section ``method`` (diffcp's allow-list)."""
        from hardlinear.layers.peers.qp_projection import solve_options

        return solve_options(str(method.get("solve_method", "Clarabel")))

    def setup(self, problem, ctx: Context) -> float:
        from hardlinear.layers.peers.qp_projection import QPProjectionLayer

        self.problem = problem
        t0 = time.perf_counter()
        self.layer = QPProjectionLayer(problem.family, self.solve_method, **self.solver_options)
        offline = time.perf_counter() - t0
        self.net = ctx.make_mlp(problem.box, problem.n).to(ctx.device, ctx.dtype)
        return offline

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k) -> y: (B, n)`` float64, on the device of ``xi`` (the solver runs on the CPU)."""
        y_hat = run_net(self.net, xi)
        return self.layer(xi.cpu(), y_hat.cpu()).to(xi.device)

    @torch.no_grad()
    def predict(self, xi: torch.Tensor) -> Prediction:
        y = self(xi)
        bad = self.layer.last_violation > VIOLATION_WARN
        if bool(bad.any()):
            warnings.warn(
                f"projection_layer: the QP solver returned {int(bad.sum())} of {len(bad)} points infeasible by more "
                f"than {VIOLATION_WARN:g} (worst {float(self.layer.last_violation.max()):.3g}); diffcp does not raise",
                stacklevel=2,
            )
        return Prediction(
            y=y,
            iterations=torch.ones(xi.shape[0], dtype=torch.long, device=y.device),
            extras={"nonfinite": self.layer.last_nonfinite, "solver_infeasible": bad},
        )

    def describe(self) -> dict[str, str]:
        return {"variant": self.solve_method}
