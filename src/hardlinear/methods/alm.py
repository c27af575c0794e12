"""Augmented-Lagrangian training (the paper's ALM baseline): a soft method with learnt multipliers.

Loss of a batch, with residuals ``e = G y - g`` (the form's equality rows) and ``v = max(H y - h, 0)``::

    L = 1/B sum_b [ f(x_b, y_b) + lambda' e_b + mu' v_b + rho/2 (||e_b||^2 + ||v_b||^2) ]

``lambda`` (one per equality row) and ``mu >= 0`` (one per inequality row) are shared across inputs and held
fixed within an epoch; after each epoch (``after_epoch``) they take a dual ascent step with the mean residual
over the epoch's training batches (``ebar``, ``vbar``)::

    lambda <- lambda + eta * ebar,        mu <- max(mu + eta * vbar, 0)

``rho`` is the paper's penalty factor (5000 for DC-OPF, 0.5 for the portfolio); the dual step ``eta``
(``dual_step``) is ``rho`` by default, the method of multipliers' own choice. That step assumes the primal
problem is (nearly) solved between updates; one epoch of Adam at lr 1e-4 does not, and on dcopf_14 with
``rho = 5000`` the equality multipliers swing by ~1e5 between epochs (measured: ``||lambda||`` oscillating
between 1.8e5 and 5.7e5 over 300 epochs, equality violation stuck at ~0.4). A smaller ``dual_step`` damps
that. No correction at inference.
Only batches seen in training mode with gradients on (the trainer's optimisation steps) enter the means, so
the validation loss does not move the multipliers.
"""

from __future__ import annotations

import torch

from hardlinear.methods.penalty import DualPenalty


class ALM(DualPenalty):
    name = "alm"

    def __init__(
        self, name: str = "alm", penalty: float = 5000.0, dual_step: float | None = None, layer_dtype: str = "float64"
    ) -> None:
        super().__init__(name=name, penalty=penalty, layer_dtype=layer_dtype)
        if dual_step is not None and not dual_step > 0:
            raise ValueError(f"dual_step must be > 0 (or null for dual_step = penalty); got {dual_step}")
        self.dual_step = self.penalty if dual_step is None else float(dual_step)

    def loss(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        eq = self.problem.eq_resid(xi, y)
        ineq = self.problem.ineq_resid(xi, y).clamp(min=0.0)
        self.observe(eq, ineq)
        lagrange = eq @ self.lam.to(eq.dtype) + ineq @ self.mu.to(ineq.dtype)
        quadratic = 0.5 * self.penalty * ((eq**2).sum(dim=1) + (ineq**2).sum(dim=1))
        return (self.problem.objective(xi, y) + lagrange + quadratic).mean()

    @torch.no_grad()
    def after_epoch(self, epoch: int) -> dict[str, float]:
        means = self.mean_violations()
        if means is not None:
            self.lam += self.dual_step * means[0]
            self.mu.copy_((self.mu + self.dual_step * means[1]).clamp(min=0.0))
        return {"alm_lambda_norm": float(self.lam.norm()), "alm_mu_norm": float(self.mu.norm())}
