"""LDF, the Lagrangian duality framework (Fioretto, Van Hentenryck, Mak, Tran, Baldo, Lombardi, ECML PKDD 2020;
``AI4OPT/ML4OPF`` ``ml4opf/loss_functions/ldf.py``, ``ml4opf/models/ldf_nn``): a plain network whose loss carries
one multiplier per constraint row, raised by a subgradient step on the rows' mean violation every few epochs.

Loss of a batch, with the form's residuals ``e = G y - g`` and ``v = max(H y - h, 0)``::

    L = 1/B sum_b [ f(x_b, y_b) + lambda' |e_b| + mu' v_b ]

After every ``update_every``-th epoch from epoch ``kickin`` on (``after_epoch``), with ``ebar``, ``vbar`` the mean
of ``|e|`` and ``v`` over that epoch's training batches::

    lambda <- lambda + step_size * ebar,        mu <- mu + step_size * vbar

Both stay >= 0 (the violations are). The base loss is the objective (self-supervised, as E2ELR's comparison
trains its baselines); ML4OPF's own default is the MSE to solutions. No correction at inference: the violations
are what the harness measures, recorded as they are.
"""

from __future__ import annotations

import torch

from hardlinear.methods.penalty import DualPenalty


class LDF(DualPenalty):
    name = "ldf"

    def __init__(
        self,
        name: str = "ldf",
        step_size: float = 1.0e4,
        update_every: int = 5,
        kickin: int = 0,
        init_multiplier: float = 0.0,
        layer_dtype: str = "float64",
    ) -> None:
        super().__init__(name=name, penalty=0.0, layer_dtype=layer_dtype)
        if not step_size > 0:
            raise ValueError(f"step_size must be > 0 (the subgradient step of the multipliers); got {step_size}")
        if update_every < 1 or kickin < 0:
            raise ValueError(f"need update_every >= 1 and kickin >= 0; got {update_every}, {kickin}")
        if not init_multiplier >= 0:
            raise ValueError(f"init_multiplier must be >= 0; got {init_multiplier}")
        self.step_size, self.update_every, self.kickin = float(step_size), int(update_every), int(kickin)
        self.init_multiplier = self.initial_multiplier = float(init_multiplier)

    def loss(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        eq = self.problem.eq_resid(xi, y).abs()
        ineq = self.problem.ineq_resid(xi, y).clamp(min=0.0)
        self.observe(eq, ineq)
        dual = eq @ self.lam.to(eq.dtype) + ineq @ self.mu.to(ineq.dtype)
        return (self.problem.objective(xi, y) + dual).mean()

    @torch.no_grad()
    def after_epoch(self, epoch: int) -> dict[str, float]:
        update = epoch >= self.kickin and (epoch + 1 - self.kickin) % self.update_every == 0
        means = self.mean_violations()  # each update sees the mean violation of its own epoch (ML4OPF's LDFLoss)
        if update and means is not None:
            self.lam += self.step_size * means[0]
            self.mu += self.step_size * means[1]
        return {"ldf/lambda_norm": float(self.lam.norm()), "ldf/mu_norm": float(self.mu.norm())}
