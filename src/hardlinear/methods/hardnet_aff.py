"""HardNet-Aff (Min, Azizan et al. 2024-25): the network predicts the free coordinates, a closed-form correction
makes every affine inequality hold (:mod:`hardlinear.layers.peers.hardnet`), trained end to end through it.

Applies only where the inequality rows on the free variables have full row rank (no more inequality rows than
free dimensions): ``setup`` checks it and raises :class:`~hardlinear.methods.base.NotApplicable` with the
counts otherwise (every DC-OPF and portfolio form here; DC3's 100-variable QPs, 50 + 50 rows, are the case it
was built for).

Loss, as the authors' code trains it (their ``get_train_loss`` with ``softWeight = 10``,
``softWeightEqFrac = 0.5``, squared norms): ``f(x, y) + penalty ((1 - w) ||(H y - h)^+||^2 + w ||G y - g||^2)``
on the corrected output, whose residuals are ~0 by construction, so the penalty only matters where rounding
leaves some. Their optional warm start without the correction (``softEpochs``) defaults to 0 and is not offered.
"""

from __future__ import annotations

import time

import torch

from hardlinear.layers.network import run_net
from hardlinear.methods.base import Context, Method, Prediction, check_dtype
from hardlinear.methods.penalty import check_penalty_options, soft_loss


class HardNetAff(Method):
    name = "hardnet_aff"
    pretrain = False

    def __init__(
        self,
        name: str = "hardnet_aff",
        penalty: float = 10.0,
        norm: str = "squared",
        eq_fraction: float = 0.5,
        rank_checks: int = 32,
        layer_dtype: str = "float64",
    ) -> None:
        super().__init__()
        check_penalty_options(penalty, norm, eq_fraction)
        if rank_checks < 0:
            raise ValueError(f"rank_checks must be >= 0; got {rank_checks}")
        self.name, self.penalty, self.norm, self.eq_fraction = name, float(penalty), norm, float(eq_fraction)
        self.rank_checks = int(rank_checks)
        self.layer_dtype = check_dtype(layer_dtype)

    def setup(self, problem, ctx: Context) -> float:
        from hardlinear.layers.peers.hardnet import HardNetAffLayer

        self.problem = problem
        t0 = time.perf_counter()
        self.layer = HardNetAffLayer(problem.family, checks=self.rank_checks, generator=ctx.generator(offset=53))
        offline = time.perf_counter() - t0
        self.net = ctx.make_mlp(problem.box, self.layer.d).to(ctx.device, ctx.dtype)
        self.layer.to(ctx.device)
        return offline

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k) -> y: (B, n)`` in ``layer_dtype``."""
        return self.layer(xi.to(self.layer_dtype), run_net(self.net, xi).to(self.layer_dtype))

    def loss(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return soft_loss(self, xi, y)

    @torch.no_grad()
    def predict(self, xi: torch.Tensor) -> Prediction:
        y = self(xi)
        stats = self.layer.last_stats
        return Prediction(y=y, iterations=torch.ones(xi.shape[0], dtype=torch.long, device=y.device), extras=stats)
