"""The reference solver as a method: one solve per instance, warm-started from a supervised network.

As the paper did, a network is fit by MSE to reference solutions (``supervised``) and its prediction is passed
as the primal starting point to backends that take one (HiGHS, OSQP, Gurobi; Clarabel ignores it, so nothing
is trained then). ``Prediction.extras["time_s"]`` is each instance's solver time (the paper reports the solve
time Gurobi reports), ``iterations`` the solver's own count, ``extras["status"]`` each solve's status.

Failures are never kept silently: a missing backend or a licence that refuses the model raises
:class:`hardlinear.solvers.SolverUnavailable` (the harness records a loud skip); a non-optimal solve raises
:class:`hardlinear.solvers.SolverError` naming the instance and status, unless ``on_failure="nan"``, which
returns NaN rows (the metrics then show NaN) with a warning and the count in ``extras["failures"]``.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import torch

from hardlinear.layers.network import run_net
from hardlinear.methods.base import Context, Method, Prediction
from hardlinear.solvers import SolverError, check_solver_options, solver_class

log = logging.getLogger(__name__)

SOLVERS = ("highs", "clarabel", "osqp", "gurobi", "slsqp")
ON_FAILURE = ("raise", "nan")


def check_failures(name: str, problem_name: str, status: list[str], on_failure: str) -> int:
    """Raise (or warn) about non-optimal solves; returns how many there were."""
    bad = [i for i, s in enumerate(status) if s != "optimal"]
    if bad:
        msg = (
            f"{name}: {len(bad)} of {len(status)} solves on {problem_name} not optimal "
            f"(first: instance {bad[0]}, status {status[bad[0]]!r})"
        )
        if on_failure == "raise":
            raise SolverError(msg + "; set on_failure=nan to record them as NaN rows")
        log.warning("%s; returned as NaN rows", msg)
    return len(bad)


class Optimizer(Method):
    name = "optimizer"
    batched = False  # one solve per instance: throughput is 1 / time per instance
    pretrain = False

    def __init__(
        self,
        name: str = "optimizer",
        solver: str = "highs",
        warm_start: bool = True,
        on_failure: str = "raise",
        **options,
    ) -> None:
        super().__init__()
        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}; got {solver!r}")
        if on_failure not in ON_FAILURE:
            raise ValueError(f"on_failure must be one of {ON_FAILURE}; got {on_failure!r}")
        check_solver_options(solver, options, self.extra_options({"solver": solver}))  # before any solver is built
        self.name, self.solver, self.on_failure, self.options = name, solver, on_failure, options
        # Only a backend that accepts a primal start gives the network something to do.
        self.warm_start = bool(warm_start) and solver_class(solver).supports_warm_start
        self.trainable = self.supervised = self.warm_start

    @classmethod
    def extra_options(cls, method: dict) -> dict:
        """The solver options this method passes on for a config section ``method`` (its solver's allow-list)."""
        solver = method.get("solver", "highs")
        return dict(solver_class(solver).OPTIONS) if solver in SOLVERS else {}

    def setup(self, problem, ctx: Context) -> float:
        from hardlinear.solvers import make_solver

        self.problem = problem
        t0 = time.perf_counter()
        self.backend = make_solver(problem, self.solver, **self.options)  # SolverUnavailable propagates
        # One solve now, so a licence that refuses the model fails the run before any training.
        G, g, H, h = problem.compact.instance(problem.box.mid)
        lhs_varies = problem.compact.input_dependent_lhs
        self.backend.solve(g, h, G=G if lhs_varies else None, H=H if lhs_varies else None)
        offline = time.perf_counter() - t0
        if self.warm_start:
            self.net = ctx.make_mlp(problem.box, problem.n).to(ctx.device, ctx.dtype)
        return offline

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        """The warm-start network's prediction ``(B, n)`` (what the supervised MSE is taken on)."""
        if not self.warm_start:
            raise RuntimeError(f"{self.name} with solver={self.solver} has no network (warm_start is off)")
        return run_net(self.net, xi)

    @torch.no_grad()
    def predict(self, xi: torch.Tensor) -> Prediction:
        problem = self.problem
        xi64 = xi.detach().to("cpu", torch.float64)
        start = run_net(self.net, xi).detach().to("cpu", torch.float64).numpy() if self.warm_start else None
        lhs_varies = problem.compact.input_dependent_lhs
        n_orig, B = problem.n_orig, xi.shape[0]
        y = np.full((B, n_orig), np.nan)
        times, iters, status = np.zeros(B), np.zeros(B, dtype=np.int64), []
        for i, xi_i in enumerate(xi64.numpy()):
            G, g, H, h = problem.compact.instance(xi_i)
            res = self.backend.solve(
                g,
                h,
                G=G if lhs_varies else None,
                H=H if lhs_varies else None,
                warm_start=None if start is None else start[i, :n_orig],
            )
            times[i], iters[i] = res.time_s, res.iterations
            status.append(res.status)
            if res.optimal:
                y[i] = res.y
        failures = check_failures(f"optimizer ({self.solver})", problem.name, status, self.on_failure)
        y_form = problem.to_form(xi64, torch.as_tensor(y)).to(xi.device)
        return Prediction(
            y=y_form,
            iterations=torch.as_tensor(iters, device=xi.device),
            extras={"time_s": times, "status": status, "failures": failures},
        )

    def describe(self) -> dict[str, str]:
        return {"variant": self.solver}
