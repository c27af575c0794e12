"""FSNet (Nguyen and Donti, NeurIPS 2025; ``MOSSLab-MIT/FSNet``): the network's raw output is moved towards
feasibility by batched L-BFGS on the squared constraint violation (:mod:`hardlinear.layers.peers.fsnet`), and
the network is trained through a truncated unrolling of that solve.

Loss (FSNet's ``_fsnet_loss``): ``mean f(x, y_hat) + dist_weight * mean ||y_hat - y_net||^2``, plus
``eq_weight * mean ||G y_net - g||^2 + ineq_weight * mean ||(H y_net - h)^+||^2`` on the *raw* output in the
batches where either raw mean exceeds ``pre_penalty_above`` (1e3). Training runs ``max_iter`` L-BFGS iterations,
the first ``unrolled`` differentiated; its tolerance starts at ``val_tol`` and is divided by 10 every
``decay_tol_step`` epochs, kept within [1e-9, 1e-6] (FSNet's schedule); inference runs up to ``max_iter``
iterations without a graph to ``test_val_tol``.

``output_box``: FSNet squashes the network's output into a box ``[-b, b]`` by a sigmoid (its QPs carry the box
``[-5, 5]`` as constraints, and the violation includes it); null gives a linear output and no box term, for
problems without one. Any linear family applies (it needs only residuals), the input-dependent portfolio too.

Promise, and what is recorded: nothing exact. The equalities and inequalities hold to the tolerance L-BFGS
reached; the harness measures the violations of every output in float64 and records them as they are.
``Prediction.iterations`` is the number of L-BFGS iterations its batch took (shared by the batch);
``extras["line_search_evaluations"]`` the evaluations of the violation its Armijo searches made (shared too).
"""

from __future__ import annotations

import numpy as np
import torch

from hardlinear.layers.network import run_net
from hardlinear.methods.base import Context, Method, Prediction, check_dtype

TOL_FLOOR, TOL_CEIL = 1e-9, 1e-6  # FSNet clips its training tolerance to this range when it decays it


def constant_rows_T(family):
    """``G'`` and ``H'`` (buffers ``G_T``, ``H_T`` of a :class:`~hardlinear.layers.equality.Float64Constants`: moved
    with the method, cast once per dtype and device) where both are constant and small enough to multiply densely,
    for the closed-form inference path of :func:`hardlinear.layers.peers.fsnet.lbfgs_linear`; else None."""
    from hardlinear.constraints.family import DENSE_LIMIT
    from hardlinear.layers.equality import Float64Constants, constant_lhs

    n = family.n
    if (family.m_eq + family.m_ineq) * n > DENSE_LIMIT:
        return None
    G = constant_lhs(family, "G") if family.m_eq else np.zeros((0, n))
    H = constant_lhs(family, "H") if family.m_ineq else np.zeros((0, n))
    return None if G is None or H is None else Float64Constants(G_T=G.T, H_T=H.T)


class FSNet(Method):
    name = "fsnet"
    iterative = True
    pretrain = False

    def __init__(
        self,
        name: str = "fsnet",
        memory: int = 30,
        max_iter: int = 50,
        unrolled: int = 30,
        scale: float = 1000.0,
        val_tol: float = 1e-7,
        test_val_tol: float = 1e-9,
        decay_tol_step: int = 100,
        grad_tol: float = 1e-6,
        armijo_c: float = 1e-4,
        shrink: float = 0.5,
        max_ls: int = 10,
        obj_weight: float = 1.0,
        dist_weight: float = 5.0,
        eq_weight: float = 10.0,
        ineq_weight: float = 10.0,
        pre_penalty_above: float = 1e3,
        output_box: float | None = None,
        layer_dtype: str = "float64",
    ) -> None:
        super().__init__()
        from hardlinear.layers.peers.fsnet import LBFGSSettings

        self.settings = LBFGSSettings(
            memory=int(memory), max_iter=int(max_iter), scale=float(scale), grad_tol=float(grad_tol),
            c=float(armijo_c), shrink=float(shrink), max_ls=int(max_ls),
        )
        if not 0 <= unrolled <= max_iter:
            raise ValueError(f"unrolled must be in [0, max_iter = {max_iter}]; got {unrolled}")
        if not (val_tol > 0 and test_val_tol > 0) or decay_tol_step < 1:
            raise ValueError(f"need val_tol, test_val_tol > 0 and decay_tol_step >= 1; got {val_tol}, {test_val_tol}, {decay_tol_step}")
        if min(obj_weight, dist_weight, eq_weight, ineq_weight, pre_penalty_above) < 0:
            raise ValueError("loss weights and pre_penalty_above must be >= 0")
        if output_box is not None and not output_box > 0:
            raise ValueError(f"output_box must be > 0 (the half-width of the sigmoid's box) or null; got {output_box}")
        self.name, self.unrolled = name, int(unrolled)
        self.val_tol0, self.test_val_tol, self.decay_tol_step = float(val_tol), float(test_val_tol), int(decay_tol_step)
        self.train_tol = self.val_tol0
        self.weights = (float(obj_weight), float(dist_weight), float(eq_weight), float(ineq_weight))
        self.pre_penalty_above = float(pre_penalty_above)
        self.output_box = None if output_box is None else float(output_box)
        self.layer_dtype = check_dtype(layer_dtype)
        self._raw: torch.Tensor | None = None

    def setup(self, problem, ctx: Context) -> float:
        self.problem = problem
        self.net = ctx.make_mlp(problem.box, problem.family.n).to(ctx.device, ctx.dtype)
        self._rows_T = constant_rows_T(problem.family)
        return 0.0

    # --- pieces --------------------------------------------------------------------------------------
    def raw_output(self, xi: torch.Tensor) -> torch.Tensor:
        """The network's output before the feasibility step, in ``layer_dtype`` (in the box if there is one)."""
        out = run_net(self.net, xi).to(self.layer_dtype)
        if self.output_box is None:
            return out
        return self.output_box * (2.0 * torch.sigmoid(out) - 1.0)

    def _violation_rows(self, xi64: torch.Tensor):
        from hardlinear.layers.peers.fsnet import squared_violation

        family, box = self.problem.family, self.output_box

        def rows(y: torch.Tensor) -> torch.Tensor:
            v = squared_violation(family.eq_resid(xi64, y), family.ineq_resid(xi64, y))
            if box is not None:
                v = v + torch.relu(y.abs() - box).square().sum(dim=1)
            return v

        return rows

    def _solve(self, xi: torch.Tensor, y0: torch.Tensor, val_tol: float, train: bool):
        from hardlinear.layers.peers.fsnet import lbfgs_feasibility

        s = self.settings
        inference = not train or not torch.is_grad_enabled() or not y0.requires_grad
        if inference and getattr(self, "_rows_T", None) is not None:  # constant rows: closed form, TorchScript
            from hardlinear.layers.peers.fsnet import lbfgs_linear

            xw = xi.to(y0.dtype)
            G_T, H_T = self._rows_T.get(("G_T", "H_T"), y0)
            family = self.problem.family
            state = lbfgs_linear(y0, G_T, family.eq_rhs(xw), H_T, family.ineq_rhs(xw), self.output_box, s, val_tol,
                                 s.max_iter)
            return state.y, state
        rows = self._violation_rows(xi.to(self.layer_dtype))
        if inference:
            state = lbfgs_feasibility(rows, y0, s, val_tol, s.max_iter)
            return state.y.detach(), state
        state = lbfgs_feasibility(rows, y0, s, val_tol, self.unrolled, differentiable=True)
        y_diff = state.y
        tail = lbfgs_feasibility(rows, y0, s, val_tol, s.max_iter - state.iterations, state=state) if state.iterations == self.unrolled else None
        if tail is None:  # converged inside the differentiated part
            return y_diff, state
        return y_diff + (tail.y - y_diff).detach(), tail

    # --- the Method interface -------------------------------------------------------------------------
    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k) -> y: (B, n)``: the raw output moved by the training-time L-BFGS (truncated unrolling)."""
        raw = self.raw_output(xi)
        self._raw = raw
        y, _ = self._solve(xi, raw, self.train_tol, train=True)
        return y

    def loss(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        from hardlinear.layers.peers.fsnet import squared_violation

        w_obj, w_dist, w_eq, w_ineq = self.weights
        raw = self._raw if self._raw is not None and self._raw.shape == y.shape else self.raw_output(xi)
        self._raw = None
        loss = w_obj * self.problem.objective(xi.to(y.dtype), y).mean() + w_dist * (y - raw).square().sum(dim=1).mean()
        xi64 = xi.to(raw.dtype)
        pre_eq = self.problem.family.eq_resid(xi64, raw).square().sum(dim=1).mean()
        pre_ineq = squared_violation(raw.new_zeros(raw.shape[0], 0), self.problem.family.ineq_resid(xi64, raw)).mean()
        if self.output_box is not None:
            pre_ineq = pre_ineq + torch.relu(raw.abs() - self.output_box).square().sum(dim=1).mean()
        if pre_eq >= self.pre_penalty_above or pre_ineq >= self.pre_penalty_above:
            loss = loss + w_eq * pre_eq + w_ineq * pre_ineq
        return loss

    @torch.no_grad()
    def predict(self, xi: torch.Tensor) -> Prediction:
        y, state = self._solve(xi, self.raw_output(xi), self.test_val_tol, train=False)
        its = torch.full((xi.shape[0],), state.iterations, dtype=torch.long, device=y.device)
        return Prediction(y=y, iterations=its, extras={"line_search_evaluations": state.line_search_evaluations})

    def after_epoch(self, epoch: int) -> dict[str, float]:
        """FSNet's schedule: the tolerance of the epoch after ``epoch`` (divided by 10 at every epoch index ``e``
        with ``(e + 1) % decay_tol_step == 0``, kept within [1e-9, 1e-6])."""
        decays = (epoch + 2) // self.decay_tol_step
        self.train_tol = float(np.clip(self.val_tol0 / 10.0**decays, TOL_FLOOR, TOL_CEIL)) if decays else self.val_tol0
        return {"fsnet/train_val_tol": self.train_tol}
