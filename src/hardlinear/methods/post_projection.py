"""Post-projection: a supervised network, its prediction projected onto C(x) by a QP per instance.

``targets`` says what the network predicts and what the projection keeps close:

* ``decisions`` (default, the paper's description): the problem's decision variables only
  (:meth:`~hardlinear.problems.base.Problem.decision_indices`: the generator outputs of a DC-OPF, the original
  variables of the portfolio), fit by MSE to the reference solutions' decisions; the projection is the feasible
  point nearest in those coordinates, ``min sum_{j in D} (y_j - y_hat_j)^2``, the other variables (angles,
  flows, slacks) following from the constraints.
* ``all``: every variable of the form (slacks included in the standard form), the nearest point in all of them.
  Measured on dcopf_200 QP (10,000 solved instances, seed 0): see docs/reproduction.md.

Either way the QP is solved for the displacement ``d = y - y_hat`` (``y_hat`` zero outside the predicted
coordinates)::

    min_d d' M d   s.t.  G(x) d = g(x) - G(x) y_hat,   H(x) d <= h(x) - H(x) y_hat     (M: 1 on predicted coordinates)

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

from hardlinear.layers.network import run_net
from hardlinear.methods.base import Context, Method, Prediction
from hardlinear.methods.optimizer import ON_FAILURE, check_failures
from hardlinear.solvers import SolveResult, check_solver_options, solver_class

SOLVERS = ("clarabel", "osqp", "gurobi")
TARGETS = ("decisions", "all")


class NearestPoint:
    """The projection QP of one family, with a backend built once (``G, H`` passed per instance if they vary)."""

    def __init__(self, family, solver: str, coordinates: np.ndarray | None = None, **options) -> None:
        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS} (a QP solver); got {solver!r}")
        self.family = family
        self.lhs_varies = bool(family.input_dependent_lhs)
        G, _, H, _ = family.instance(family.box.mid)
        n = family.n
        self.coordinates = np.arange(n) if coordinates is None else np.asarray(coordinates, dtype=int)
        weight = np.zeros(n)
        weight[self.coordinates] = 2.0
        self.backend = solver_class(solver)(sp.diags(weight, format="csr"), np.zeros(n), G, H, **options)

    def __call__(self, xi: np.ndarray, y_hat: np.ndarray) -> SolveResult:
        """``xi: (k,), y_hat: (len(coordinates),)`` -> the feasible ``y: (n,)`` nearest in those coordinates
        (``objective`` = that squared distance)."""
        G, g, H, h = self.family.instance(xi)
        full = np.zeros(self.family.n)
        full[self.coordinates] = np.asarray(y_hat, dtype=np.float64)
        y_hat = full
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
        self,
        name: str = "post_projection",
        solver: str = "clarabel",
        targets: str = "decisions",
        on_failure: str = "raise",
        **options,
    ) -> None:
        super().__init__()
        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS} (a QP solver); got {solver!r}")
        if targets not in TARGETS:
            raise ValueError(f"targets must be one of {TARGETS}; got {targets!r}")
        if on_failure not in ON_FAILURE:
            raise ValueError(f"on_failure must be one of {ON_FAILURE}; got {on_failure!r}")
        check_solver_options(solver, options, self.extra_options({"solver": solver}))  # before any solver is built
        self.name, self.solver, self.targets, self.on_failure, self.options = name, solver, targets, on_failure, options

    @classmethod
    def extra_options(cls, method: dict) -> dict:
        """The solver options this method passes on for a config section ``method`` (its solver's allow-list)."""
        solver = method.get("solver", "clarabel")
        return dict(solver_class(solver).OPTIONS) if solver in SOLVERS else {}

    def setup(self, problem, ctx: Context) -> float:
        self.problem = problem
        self.coordinates = problem.decision_indices() if self.targets == "decisions" else np.arange(problem.n)
        self.net = ctx.make_mlp(problem.box, len(self.coordinates)).to(ctx.device, ctx.dtype)
        t0 = time.perf_counter()
        self.projection = NearestPoint(problem.family, self.solver, coordinates=self.coordinates, **self.options)
        # One solve now, so a licence that refuses the model fails the run before any training.
        self.projection(problem.box.mid, np.zeros(len(self.coordinates)))
        return time.perf_counter() - t0

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        """The network's unprojected prediction ``(B, len(coordinates))`` (what the supervised MSE is taken on)."""
        return run_net(self.net, xi)

    def solution_target(self, y_ref: torch.Tensor) -> torch.Tensor:
        return y_ref[:, torch.as_tensor(self.coordinates, device=y_ref.device)]

    @torch.no_grad()
    def predict(self, xi: torch.Tensor) -> Prediction:
        y_hat = run_net(self.net, xi).detach().to("cpu", torch.float64).numpy()
        xi_np = xi.detach().to("cpu", torch.float64).numpy()
        y = np.full((len(y_hat), self.problem.n), np.nan)
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
