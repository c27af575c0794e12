"""The soft-penalty baseline: an MLP predicting ``y`` in the problem's form, trained on objective + penalty.

Loss of a batch (``B`` instances, residuals of the problem's form)::

    L = 1/B sum_b [ f(x_b, y_b) + penalty * ( ||G y_b - g||_2^2 + ||max(H y_b - h, 0)||_2^2 ) ]

No correction at inference: the prediction is the network's output, so it is feasible only approximately.

Scale: the objective is used as the problem defines it (DC-OPF in dollars, ~1e3 to 1e5; the portfolio's yield
~0.3) while residuals are in per-unit power and radians. At a penalty ``rho`` the loss balances where
``2 rho |violation| ~ |df/dy|`` (for DC-OPF, a generator's cost per p.u., ~1e3): the paper's 5000 for DC-OPF and
0.5 for the portfolio are calibrated to exactly these units, so they are kept rather than rescaled.
The network runs in the trainer's dtype; its output is cast to ``layer_dtype`` (float64 by default) before the
loss and before any correction, so the residuals of 1e4-dollar objectives are not lost to float32 rounding.
"""

from __future__ import annotations

import torch

from hardlinear.methods.base import Context, Method, check_dtype


def squared_violation(problem, xi: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``xi: (B, k), y: (B, n) -> (||G y - g||^2: (B,), ||max(H y - h, 0)||^2: (B,))`` in the form's rows."""
    eq = problem.eq_resid(xi, y)
    ineq = problem.ineq_resid(xi, y).clamp(min=0.0)
    return (eq**2).sum(dim=1), (ineq**2).sum(dim=1)


def run_net(net: torch.nn.Module, xi: torch.Tensor) -> torch.Tensor:
    """``net(xi)`` with ``xi`` cast to the network's dtype: callers may pass float64 inputs, so that the layers
    after the network enforce the constraints of the exact input rather than of its float32 rounding."""
    return net(xi.to(next(net.parameters()).dtype))


class Penalty(Method):
    """Task network on the problem's form, soft penalty in the loss, nothing at inference."""

    name = "penalty"
    pretrain = False  # no pre-training target: all epochs are on the loss below

    def __init__(self, name: str = "penalty", penalty: float = 5000.0, layer_dtype: str = "float64") -> None:
        super().__init__()
        if not penalty >= 0:
            raise ValueError(f"penalty must be >= 0 (0 = objective only); got {penalty}")
        self.name, self.penalty = name, float(penalty)
        self.layer_dtype = check_dtype(layer_dtype)

    def setup(self, problem, ctx: Context) -> float:
        self.problem = problem
        self.net = ctx.make_mlp(problem.box, problem.n).to(ctx.device, ctx.dtype)
        return 0.0

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k) -> y: (B, n)`` in ``layer_dtype``."""
        return run_net(self.net, xi).to(self.layer_dtype)

    def regress(self, xi: torch.Tensor) -> torch.Tensor:
        return run_net(self.net, xi)

    def loss(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        eq2, ineq2 = squared_violation(self.problem, xi, y)
        return (self.problem.objective(xi, y) + self.penalty * (eq2 + ineq2)).mean()
