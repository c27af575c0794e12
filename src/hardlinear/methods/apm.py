"""APM: a network corrected by alternating projections, at inference and (by default) in training.

Training, by ``train_iter``:

* ``train_iter > 0`` (default 300, the paper's iteration limit): the loss is the soft loss of
  :mod:`hardlinear.methods.penalty` on the *corrected* output, the correction unrolled for at most
  ``train_iter`` iterations with the same tolerance stop (DC3 trains through its correction the same way). The
  network then learns outputs whose projection is cheap, rather than cheap outputs that the projection
  moves far. Why this is the default: the paper tunes a penalty factor for DC3 and ALM only (its penalty
  table), so its APM and EAPM networks do not depend on one, and with the correction in the loop APM reaches
  the paper's near-zero gaps, where a penalty-trained network projected afterwards does not
  (docs/reproduction.md has both). ``penalty`` defaults to 0 here: the output is already feasible to ``tol``
  once the iterations converge.
  The unrolled passes run in ``train_dtype`` (float32 by default); inference and every reported number use
  ``layer_dtype`` (float64).
* ``train_iter = 0``: the :class:`~hardlinear.methods.penalty.Penalty` network (objective + penalty *
  violation on the raw output), corrected only at inference; set ``penalty`` too.

``fit="supervised"`` (not in the config file, so that the default rows keep their hash: add it with
``+method.fit=supervised``) is the other reading of the paper: the network is fit by MSE to solved instances,
as post-projection's, and APM corrects it at inference; ``train_iter`` and ``penalty`` are then unused.

At inference the prediction is taken to ``P_V`` (the equalities, by
:class:`hardlinear.layers.equality.EqualityProjector`) and then alternately projected onto the slacks'
nonnegative orthant and back onto ``V`` until its largest inequality violation is ``<= tol`` (1e-4) or after
``max_iter`` (300) iterations; see :mod:`hardlinear.layers.peers.apm`. Needs the standard form (slacks).
"""

from __future__ import annotations

import time

import torch

from hardlinear.errors import NotApplicable
from hardlinear.methods.base import Context, Prediction, check_dtype
from hardlinear.methods.penalty import Penalty

FITS = ("objective", "supervised")  # what the network is trained on (see the module docstring)


class APM(Penalty):
    name = "apm"
    iterative = True
    extrapolate = False
    required_form = "standard"  # the slacks' orthant: read by the config check and the benchmarks

    def __init__(
        self,
        name: str = "apm",
        penalty: float = 0.0,
        norm: str = "l2",
        eq_fraction: float = 0.5,
        tol: float = 1e-4,
        max_iter: int = 300,
        train_iter: int = 300,
        train_dtype: str = "float32",
        layer_dtype: str = "float64",
        fit: str = "objective",
    ) -> None:
        super().__init__(name=name, penalty=penalty, norm=norm, eq_fraction=eq_fraction, layer_dtype=layer_dtype)
        self.train_dtype = check_dtype(train_dtype)
        if fit not in FITS:
            raise ValueError(f"fit must be one of {FITS}; got {fit!r}")
        self.fit, self.supervised = fit, fit == "supervised"
        if tol < 0 or max_iter < 0 or train_iter < 0:
            raise ValueError(
                f"need tol >= 0, max_iter >= 0 and train_iter >= 0; got tol={tol}, max_iter={max_iter}, train_iter={train_iter}"
            )
        self.tol, self.max_iter, self.train_iter = float(tol), int(max_iter), int(train_iter)

    def _layer_options(self) -> dict:
        return {}

    def setup(self, problem, ctx: Context) -> float:
        if problem.form != self.required_form:
            raise NotApplicable(
                f"{self.name} projects onto the slacks' orthant and needs the {self.required_form} form; "
                f"got form={problem.form!r}: set problem.form={self.required_form}"
            )
        from hardlinear.layers.equality import EqualityProjector
        from hardlinear.layers.peers.apm import AlternatingProjection

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

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k) -> y: (B, n)`` in ``layer_dtype``: what the loss sees; after ``train_iter`` unrolled
        iterations when > 0, run in ``train_dtype`` in training mode (the backward pass through hundreds of
        iterations is 2-4x cheaper in float32; the 1e-4 tolerance is far above its rounding) and in
        ``layer_dtype`` otherwise (the validation loss that picks the checkpoint)."""
        y = super().forward(xi)
        if self.train_iter == 0:
            return y
        dtype = self.train_dtype if self.training else self.layer_dtype
        y, _ = self.correction(xi.to(dtype), y.to(dtype), max_iter=self.train_iter)
        return y.to(self.layer_dtype)

    @torch.no_grad()
    def predict(self, xi: torch.Tensor) -> Prediction:
        y, iterations = self.correction(xi.to(self.layer_dtype), super().forward(xi))
        return Prediction(y=y, iterations=iterations)

    def describe(self) -> dict[str, str]:
        return {**super().describe(), "variant": "supervised"} if self.supervised else super().describe()
