"""APM: the soft-penalty network, corrected at inference by alternating projections.

Training is the :class:`~hardlinear.methods.penalty.Penalty` method's (objective + penalty * squared
violation, no correction). At inference the prediction is taken to ``P_V`` (the equalities, by
:class:`hardlinear.layers.equality.EqualityProjector`) and then alternately projected onto the slacks'
nonnegative orthant and back onto ``V`` until its largest inequality violation is ``<= tol`` (1e-4) or after
``max_iter`` (300) iterations; see :mod:`hardlinear.layers.apm`. Needs the standard form (slacks).
"""

from __future__ import annotations

import time

import torch

from hardlinear.methods.base import Context, Prediction
from hardlinear.methods.penalty import Penalty


class APM(Penalty):
    name = "apm"
    iterative = True
    extrapolate = False

    def __init__(
        self,
        name: str = "apm",
        penalty: float = 5000.0,
        norm: str = "l2",
        eq_fraction: float = 0.5,
        tol: float = 1e-4,
        max_iter: int = 300,
        layer_dtype: str = "float64",
    ) -> None:
        super().__init__(name=name, penalty=penalty, norm=norm, eq_fraction=eq_fraction, layer_dtype=layer_dtype)
        if tol < 0 or max_iter < 0:
            raise ValueError(f"need tol >= 0 and max_iter >= 0; got tol={tol}, max_iter={max_iter}")
        self.tol, self.max_iter = float(tol), int(max_iter)

    def _layer_options(self) -> dict:
        return {}

    def setup(self, problem, ctx: Context) -> float:
        if problem.form != "standard":
            raise ValueError(
                f"{self.name} projects onto the slacks' orthant and needs the standard form; "
                f"got form={problem.form!r}: run with problem.form=standard"
            )
        from hardlinear.layers.apm import AlternatingProjection
        from hardlinear.layers.equality import EqualityProjector

        super().setup(problem, ctx)
        t0 = time.perf_counter()
        projector = EqualityProjector(problem.family)
        self.correction = AlternatingProjection(
            projector,
            slack_start=problem.n_orig,
            tol=self.tol,
            max_iter=self.max_iter,
            extrapolate=self.extrapolate,
            **self._layer_options(),
        ).to(ctx.device)
        return time.perf_counter() - t0

    @torch.no_grad()
    def predict(self, xi: torch.Tensor) -> Prediction:
        y, iterations = self.correction(xi.to(self.layer_dtype), self(xi))
        return Prediction(y=y, iterations=iterations)
