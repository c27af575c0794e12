"""Post-projection: a supervised network, its prediction projected onto C(x) by a QP per instance.

The network is fit by MSE to reference solutions in the problem's form; at inference each prediction
``y_hat`` is replaced by the nearest feasible point in the form's variables (the slacks included in the
standard form), solved for the displacement ``d = y - y_hat``::

    min_d ||d||_2^2   s.t.  G(x) d = g(x) - G(x) y_hat,   H(x) d <= h(x) - H(x) y_hat

by ``solver`` (clarabel, osqp or gurobi). Why the displacement: written in ``y`` the objective
``||y||^2 - 2 y_hat'y`` is a small difference of large terms, and an interior-point method's relative gap
tolerance (1e-8 of ``||y_hat||^2``) leaves ``y`` wrong by ~1e-4 ``||y_hat||``; in ``d`` the objective is the
squared distance itself. It also leaves only right-hand sides changing per instance, so for a constant
``G, H`` one backend model serves every instance (no per-instance rebuild, no ``c`` update needed).
The reported time is the wall time of ``predict`` (network and solves). ``iterations`` is the solver's own
count. Non-optimal projections raise :class:`hardlinear.solvers.SolverError` unless ``on_failure="nan"``.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
import torch

from hardlinear.methods.base import Context, Method, Prediction
from hardlinear.methods.optimizer import ON_FAILURE, check_failures
from hardlinear.methods.penalty import run_net
from hardlinear.solvers import SolveResult, solver_class

SOLVERS = ("clarabel", "osqp", "gurobi")


class NearestPoint:
    """The projection QP of one family, with a backend built once (``G, H`` passed per instance if they vary)."""

    def __init__(self, family, solver: str, **options) -> None:
        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS} (a QP solver); got {solver!r}")
        self.family = family
        self.lhs_varies = bool(family.input_dependent_lhs)
        G, _, H, _ = family.instance(family.box.mid)
        n = family.n
        self.backend = solver_class(solver)(2.0 * sp.identity(n, format="csr"), np.zeros(n), G, H, **options)

    def __call__(self, xi: np.ndarray, y_hat: np.ndarray) -> SolveResult:
        """``xi: (k,), y_hat: (n,)`` -> the nearest feasible ``y`` (``objective`` = squared distance)."""
        G, g, H, h = self.family.instance(xi)
        y_hat = np.asarray(y_hat, dtype=np.float64)
        res = self.backend.solve(
            g - G @ y_hat, h - H @ y_hat, G=G if self.lhs_varies else None, H=H if self.lhs_varies else None
        )
        return SolveResult(res.y + y_hat, res.objective, res.status, res.time_s, res.iterations)


def project(family, xi: np.ndarray, y_hat: np.ndarray, solver: str, **options) -> SolveResult:
    """Nearest point of ``C(x)`` to ``y_hat`` for one instance (builds a backend; see :class:`NearestPoint`)."""
    return NearestPoint(family, solver, **options)(xi, y_hat)


class PostProjection(Method):
    name = "post_projection"
    supervised = True
    batched = False  # one QP per instance: throughput is 1 / time per instance
    pretrain = False

    def __init__(
        self, name: str = "post_projection", solver: str = "clarabel", on_failure: str = "raise", **options
    ) -> None:
        super().__init__()
        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS} (a QP solver); got {solver!r}")
        if on_failure not in ON_FAILURE:
            raise ValueError(f"on_failure must be one of {ON_FAILURE}; got {on_failure!r}")
        self.name, self.solver, self.on_failure, self.options = name, solver, on_failure, options

    def setup(self, problem, ctx: Context) -> float:
        self.problem = problem
        self.net = ctx.make_mlp(problem.box, problem.n).to(ctx.device, ctx.dtype)
        t0 = time.perf_counter()
        self.projection = NearestPoint(problem.family, self.solver, **self.options)
        # One solve now, so a licence that refuses the model fails the run before any training.
        self.projection(problem.box.mid, np.zeros(problem.n))
        return time.perf_counter() - t0

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        """The network's unprojected prediction ``(B, n)`` (what the supervised MSE is taken on)."""
        return run_net(self.net, xi)

    @torch.no_grad()
    def predict(self, xi: torch.Tensor) -> Prediction:
        y_hat = run_net(self.net, xi).detach().to("cpu", torch.float64).numpy()
        xi_np = xi.detach().to("cpu", torch.float64).numpy()
        y = np.full_like(y_hat, np.nan)
        status, iters = [], np.zeros(len(y), dtype=np.int64)
        for i in range(len(xi_np)):
            res = self.projection(xi_np[i], y_hat[i])
            status.append(res.status)
            iters[i] = res.iterations
            if res.optimal:
                y[i] = res.y
        failures = check_failures(f"post_projection ({self.solver})", self.problem.name, status, self.on_failure)
        return Prediction(
            y=torch.as_tensor(y, device=xi.device),
            iterations=torch.as_tensor(iters, device=xi.device),
            extras={"status": status, "failures": failures},
        )

    def describe(self) -> dict[str, str]:
        return {"variant": self.solver}
