"""Pinet (Grontas, Terpin et al., ICLR 2026; ``antonioterpin/pinet``, PyPI ``pinet-hcnn``): the network's raw
output is projected onto ``C(x) = {y : G y = g(x), H y <= h(x)}`` by a fixed number of Douglas-Rachford
iterations on the slack-lifted problem (:mod:`hardlinear.layers.douglas_rachford`), and the network is trained
on the objective of the projected output alone (no penalty), through the projection's implicit backward pass.

What it promises, and what is recorded: the equalities hold to rounding (the output is the equality projection
of DR's governing sequence); the inequalities only to the distance DR has left after ``n_iter_test``
iterations, which the harness measures and records as a violation like any other. Pinet's benchmark fixes the
iteration counts (no stopping test), so ``Prediction.iterations`` is ``n_iter_test`` for every instance.

Does not apply (``NotApplicable``) where ``G`` or ``H`` depends on the input (the portfolio): Pinet factorises
the lifted matrix once; an input-dependent one would need a pseudo-inverse per instance, which its DC3 and
published settings never use. Also refused: lifted systems above ``max_lifted`` columns (a dense projector).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from hardlinear.errors import NotApplicable
from hardlinear.layers.network import run_net
from hardlinear.methods.base import Context, Method, Prediction, check_dtype

# Where DR's governing sequence starts: "zero" as pinet-hcnn 0.2.0; "raw" = (y_raw, 0), as Pinet's commit e662b15,
# whose published DC3 runs conf/experiment/pinet_e662b15.yaml reproduces (the outputs differ after finitely many steps)
STARTS = ("zero", "raw")


class Pinet(Method):
    name = "pinet"
    iterative = True
    pretrain = False

    def __init__(
        self,
        name: str = "pinet",
        sigma: float = 1.0,
        omega: float = 1.7,
        n_iter_train: int = 100,
        n_iter_test: int = 100,
        backward: str = "implicit",
        n_iter_bwd: int = 5,
        bwd_tol: float = 1e-5,
        equilibrate_iter: int = 0,
        equilibrate_tol: float = 1e-3,
        equilibrate_ord: float = 2.0,
        equilibrate_col_scaling: bool = False,
        equilibrate_mode: str = "gauss",
        equilibrate_safeguard: bool = False,
        max_lifted: int = 20000,
        layer_dtype: str = "float64",
        start: str = "zero",
    ) -> None:
        super().__init__()
        from hardlinear.layers.douglas_rachford import BACKWARDS, RuizSettings

        if n_iter_train < 0 or n_iter_test < 1:
            raise ValueError(f"need n_iter_train >= 0 and n_iter_test >= 1; got {n_iter_train}, {n_iter_test}")
        if backward not in BACKWARDS:
            raise ValueError(f"backward must be one of {BACKWARDS}; got {backward!r}")
        if not sigma > 0 or not 0 < omega < 2:
            raise ValueError(f"Douglas-Rachford needs sigma > 0 and 0 < omega < 2; got {sigma}, {omega}")
        if not 0 <= bwd_tol < float("inf"):  # NaN fails too: a NaN tolerance never stops the backward iterations
            raise ValueError(f"bwd_tol must be a finite number >= 0 (e.g. 1e-5); got {bwd_tol}")
        self.name, self.sigma, self.omega = name, float(sigma), float(omega)
        self.n_iter_train, self.n_iter_test = int(n_iter_train), int(n_iter_test)
        self.backward, self.n_iter_bwd, self.bwd_tol = backward, int(n_iter_bwd), float(bwd_tol)
        self.ruiz = RuizSettings(
            max_iter=int(equilibrate_iter), tol=float(equilibrate_tol), ord=float(equilibrate_ord),
            col_scaling=bool(equilibrate_col_scaling), mode=equilibrate_mode, safeguard=bool(equilibrate_safeguard),
        )
        if start not in STARTS:
            raise ValueError(f"start must be one of {STARTS}; got {start!r}")
        self.start = start
        self.max_lifted = int(max_lifted)
        self.layer_dtype = check_dtype(layer_dtype)

    def setup(self, problem, ctx: Context) -> float:
        from hardlinear.layers.douglas_rachford import DouglasRachfordProjection
        from hardlinear.layers.equality import constant_lhs

        self.problem = problem
        family = problem.family
        G, H = constant_lhs(family, "G"), constant_lhs(family, "H")
        varying = [name for name, M in (("G", G), ("H", H)) if M is None]
        if varying:
            raise NotApplicable(
                f"Pinet factorises the lifted constraint matrix [[G, 0], [H, -I]] once; here {' and '.join(varying)} "
                f"{'depend' if len(varying) > 1 else 'depends'} on the input ({family.m_eq} equality, {family.m_ineq} inequality rows, n = {family.n})"
            )
        lifted = family.n + family.m_ineq
        if lifted > self.max_lifted:
            raise NotApplicable(
                f"Pinet's dense projector on the lifted space has {lifted} columns (n = {family.n} + {family.m_ineq} "
                f"slacks) > max_lifted = {self.max_lifted}"
            )
        t0 = time.perf_counter()
        self.layer = DouglasRachfordProjection(
            np.asarray(G, dtype=np.float64).reshape(family.m_eq, family.n),
            np.asarray(H, dtype=np.float64).reshape(family.m_ineq, family.n),
            ruiz=self.ruiz, sigma=self.sigma, omega=self.omega, backward=self.backward,
            n_iter_bwd=self.n_iter_bwd, bwd_tol=self.bwd_tol,
        ).to(ctx.device)
        offline = time.perf_counter() - t0
        self.net = ctx.make_mlp(problem.box, family.n).to(ctx.device, ctx.dtype)
        return offline

    def _project(self, xi: torch.Tensor, n_iter: int) -> torch.Tensor:
        xi64 = xi.to(self.layer_dtype)
        y_raw = run_net(self.net, xi).to(self.layer_dtype)
        family = self.problem.family
        s0 = None
        if self.start == "raw":  # e662b15's start: the raw output as the layer's (scaled) y, slacks 0
            (d,) = self.layer.consts.get(("d",), y_raw)
            s0 = torch.cat([y_raw / d, y_raw.new_zeros(y_raw.shape[0], family.m_ineq)], dim=1)
        y, _ = self.layer(y_raw, family.eq_rhs(xi64), family.ineq_rhs(xi64), n_iter=n_iter, s0=s0)
        return y

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k) -> y: (B, n)`` after ``n_iter_train`` DR iterations (training's projection)."""
        return self._project(xi, self.n_iter_train)

    @torch.no_grad()
    def predict(self, xi: torch.Tensor) -> Prediction:
        y = self._project(xi, self.n_iter_test)
        return Prediction(y=y, iterations=torch.full((xi.shape[0],), self.n_iter_test, dtype=torch.long, device=y.device))

    def describe(self) -> dict[str, str]:
        parts = [] if self.backward == "implicit" else [f"backward={self.backward}"]
        parts += ["start=raw"] if self.start == "raw" else []
        return {"variant": " ".join(parts)}
