"""The soft-penalty baseline: an MLP predicting ``y`` in the problem's form, trained on objective + penalty.

Loss of a batch (``B`` instances, residuals ``e = G y - g`` and ``v = max(H y - h, 0)`` of the problem's form)::

    norm="l2" (default):  L = 1/B sum_b [ f(x_b, y_b) + rho (1 - w) ||v_b||_2 + rho w ||e_b||_2 ]
    norm="squared":       L = 1/B sum_b [ f(x_b, y_b) + rho (1 - w) ||v_b||_2^2 + rho w ||e_b||_2^2 ]

with ``rho = penalty`` and ``w = eq_fraction``. Why ``l2`` by default: it is what DC3's published code trains
with (``softWeight`` and ``softWeightEqFrac = 0.5``), and the paper's baselines follow DC3; the DC3 paper's
text writes squared norms, available as ``norm="squared"``. The two behave very differently on a linear
objective: the unsquared norm is an exact penalty (for ``rho`` above the multipliers' size the penalised optimum
is feasible), while with the square the optimum stays infeasible by about ``|df/dy| / (2 rho)`` (measured on
the portfolio at rho = 0.5: gap -256 %, equality violation 0.11 after the paper's 500 epochs).

No correction at inference: the prediction is the network's output, so it is feasible only approximately.
Scale: the objective is used as the problem defines it (DC-OPF in dollars, ~1e3 to 1e5; the portfolio's yield
~0.3) while residuals are in per-unit power and radians; the paper's 5000 (DC-OPF) and 0.5 (portfolio) are
calibrated to these units, so they are kept rather than rescaled.
The network runs in the trainer's dtype; its output is cast to ``layer_dtype`` (float64 by default) before the
loss and before any correction, so the residuals of 1e4-dollar objectives are not lost to float32 rounding.
"""

from __future__ import annotations

import torch

from hardlinear.layers.network import run_net
from hardlinear.methods.base import Context, Method, check_dtype

NORMS = ("l2", "squared")


def violation_norms(problem, xi: torch.Tensor, y: torch.Tensor, norm: str = "l2") -> tuple[torch.Tensor, torch.Tensor]:
    """``xi: (B, k), y: (B, n) -> (eq: (B,), ineq: (B,))``: ``||G y - g||`` and ``||max(H y - h, 0)||``, both
    squared when ``norm="squared"``. The square root's gradient at a zero residual is taken as zero."""
    eq = problem.eq_resid(xi, y)
    ineq = problem.ineq_resid(xi, y).clamp(min=0.0)
    eq2, ineq2 = (eq**2).sum(dim=1), (ineq**2).sum(dim=1)
    if norm == "squared":
        return eq2, ineq2
    return _safe_sqrt(eq2), _safe_sqrt(ineq2)


def _safe_sqrt(x: torch.Tensor) -> torch.Tensor:
    positive = x > 0
    return torch.where(positive, torch.sqrt(torch.where(positive, x, 1.0)), 0.0)


def soft_loss(method, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The penalised objective of a batch (module docstring), from the method's ``penalty``, ``norm`` and
    ``eq_fraction``."""
    eq, ineq = violation_norms(method.problem, xi, y, method.norm)
    w = method.eq_fraction
    return (method.problem.objective(xi, y) + method.penalty * ((1.0 - w) * ineq + w * eq)).mean()


def check_penalty_options(penalty: float, norm: str, eq_fraction: float) -> None:
    if not penalty >= 0:
        raise ValueError(f"penalty must be >= 0 (0 = objective only); got {penalty}")
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}; got {norm!r}")
    if not 0.0 <= eq_fraction <= 1.0:
        raise ValueError(f"eq_fraction must be in [0, 1]; got {eq_fraction}")


class Penalty(Method):
    """Task network on the problem's form, soft penalty in the loss, nothing at inference."""

    name = "penalty"
    pretrain = False  # no pre-training target: all epochs are on the loss below

    def __init__(
        self,
        name: str = "penalty",
        penalty: float = 5000.0,
        norm: str = "l2",
        eq_fraction: float = 0.5,
        layer_dtype: str = "float64",
    ) -> None:
        super().__init__()
        check_penalty_options(penalty, norm, eq_fraction)
        self.name, self.penalty, self.norm, self.eq_fraction = name, float(penalty), norm, float(eq_fraction)
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
        return soft_loss(self, xi, y)


class DualPenalty(Penalty):
    """A penalty method with one multiplier per constraint row (ALM, LDF): the buffers ``lam`` (equalities) and
    ``mu`` (inequalities), and the epoch's violation sums that their update reads (``observe`` in the loss,
    ``mean_violations`` at the epoch's end). Why one class: the two methods differ only in their update rule."""

    initial_multiplier = 0.0

    def setup(self, problem, ctx: Context) -> float:
        super().setup(problem, ctx)
        m_eq, m_ineq = problem.family.m_eq, problem.family.m_ineq
        start, dtype = float(self.initial_multiplier), self.layer_dtype
        self.register_buffer("lam", torch.full((m_eq,), start, dtype=dtype, device=ctx.device))
        self.register_buffer("mu", torch.full((m_ineq,), start, dtype=dtype, device=ctx.device))
        self._reset_sums()
        return 0.0

    def _reset_sums(self) -> None:
        self._eq_sum = torch.zeros_like(self.lam)
        self._ineq_sum = torch.zeros_like(self.mu)
        self._count = 0

    def observe(self, eq: torch.Tensor, ineq: torch.Tensor) -> None:
        """Add a training batch's violations ``(B, m_eq), (B, m_ineq)`` to the epoch's sums (no gradient)."""
        if self.training and torch.is_grad_enabled():
            self._eq_sum = self._eq_sum.to(eq.device) + eq.detach().sum(dim=0)
            self._ineq_sum = self._ineq_sum.to(ineq.device) + ineq.detach().sum(dim=0)
            self._count += eq.shape[0]

    def mean_violations(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The epoch's mean violations per row (None if no training batch was seen), and the sums reset."""
        out = None if not self._count else ((self._eq_sum / self._count).to(self.lam), (self._ineq_sum / self._count).to(self.mu))
        self._reset_sums()
        return out
