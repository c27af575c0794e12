"""The Euclidean projection onto C(x) as a differentiable layer (the OptNet / cvxpylayers line), with the real
``cvxpylayers`` package:

    P_x(y_hat) = argmin_y ||y - y_hat||^2   s.t.  G(x) y = g(x),  H(x) y <= h(x).

One parametrised cvxpy problem is built once (DPP: ``y_hat``, ``g``, ``h`` are parameters, and so are ``G`` and
``H`` when they depend on the input; a parameter matrix times the variable is DPP-compliant, so the portfolio's
``H(x)`` needs no reformulation). A batch is solved instance by instance by diffcp's conic back end
(``solve_method``: Clarabel by default, an interior-point method, measured ~6e-8 absolute inequality residual;
SCS at its default accuracy leaves ~7e-4) and differentiated through the conic program's residual map.

Why cvxpylayers and not qpth: qpth's batched interior point works on dense matrices (its advantage is a GPU);
cvxpylayers takes the problem as written (sparse constant ``G``, ``H``) and is the package the issue asks for.
Both solve one QP per instance with an interior-point method, which is the cost being measured.

Feasibility is that of the solver's tolerance, not exact: the layer guarantees nothing beyond it. Worse, diffcp
returns whatever the conic solver stopped at without raising: a network output scaled by 1e6 came back
infeasible by 4.0 on the portfolio (Clarabel, tests/test_peer_guarantees.py), so every call records the largest
residual per instance in ``last_violation`` and the method warns when one exceeds ``1e-6``. A non-finite
entry of ``y_hat`` is projected as 0.
"""

from __future__ import annotations

import scipy.sparse as sp
import torch
from torch import nn

from hardlinear.constraints.family import ConstraintFamily
from hardlinear.layers.equality import constant_lhs
from hardlinear.runtime.extras import install_hint

SOLVE_METHODS = ("Clarabel", "SCS", "ECOS")


def solve_options(solve_method: str) -> dict:
    """The options a config may pass to diffcp's ``solve_method`` (an allow-list: tolerances and iteration limits;
    never SCS's ``write_data_filename`` / ``log_csv_filename`` nor diffcp's process pools)."""
    from hardlinear.solvers.base import COUNT, TOLERANCE

    return {
        "Clarabel": {"max_iter": COUNT, "tol_gap_abs": TOLERANCE, "tol_gap_rel": TOLERANCE, "tol_feas": TOLERANCE},
        "SCS": {"max_iters": COUNT, "eps_abs": TOLERANCE, "eps_rel": TOLERANCE, "eps_infeas": TOLERANCE},
        "ECOS": {"max_iters": COUNT, "abstol": TOLERANCE, "reltol": TOLERANCE, "feastol": TOLERANCE},
    }.get(solve_method, {})


class QPProjectionLayer(nn.Module):
    """``forward(xi: (B, k), y_hat: (B, n)) -> (B, n)`` float64: the nearest point of ``C(x)``, differentiable."""

    def __init__(self, family: ConstraintFamily, solve_method: str = "Clarabel", **solver_options) -> None:
        super().__init__()
        import cvxpy as cp

        try:
            from cvxpylayers.torch import CvxpyLayer
        except ImportError as err:  # recorded as skipped, loudly, by the harness
            from hardlinear.solvers.base import SolverUnavailable

            raise SolverUnavailable(
                f"the projection layer needs the cvxpylayers package (Python >= 3.11): {install_hint('harness')} ({err})"
            ) from err

        if solve_method not in SOLVE_METHODS:
            raise ValueError(f"solve_method must be one of {SOLVE_METHODS} (diffcp's back ends); got {solve_method!r}")
        from hardlinear.solvers.base import check_solver_options

        check_solver_options(solve_method, solver_options, solve_options(solve_method))
        self.family, self.n = family, family.n
        y, y_hat = cp.Variable(family.n), cp.Parameter(family.n)
        params, constraints, self.varying = [y_hat], [], []
        for which, rows, sense in (("G", family.m_eq, "eq"), ("H", family.m_ineq, "ineq")):
            if not rows:
                continue
            rhs = cp.Parameter(rows)
            params.append(rhs)
            A = constant_lhs(family, which)
            if A is None:
                A = cp.Parameter((rows, family.n))
                params.append(A)
                self.varying.append(which)
            else:
                A = sp.csr_matrix(A) if not sp.issparse(A) else A
            expr = A @ y
            constraints.append(expr == rhs if sense == "eq" else expr <= rhs)
        problem = cp.Problem(cp.Minimize(cp.sum_squares(y - y_hat)), constraints)
        if not problem.is_dpp():  # pragma: no cover - the formulation above is DPP by construction
            raise ValueError("the projection problem is not DPP; cvxpylayers cannot differentiate it")
        self.solver_args = {"solve_method": solve_method, **solver_options}
        # Held outside the module tree: its sparse CSR buffers are not state (and cannot be deep-copied, which
        # the trainer does to keep its best checkpoint); it is rebuilt from the family, never saved.
        self._cvxpy = (CvxpyLayer(problem, parameters=params, variables=[y], solver_args=self.solver_args),)

    def extra_repr(self) -> str:
        return f"n={self.n}, varying={self.varying}, solver_args={self.solver_args}"

    def forward(self, xi: torch.Tensor, y_hat: torch.Tensor) -> torch.Tensor:
        xi = xi.to(torch.float64)
        # A solver cannot take NaN or inf: such entries are projected as 0 (counted in last_nonfinite).
        y_hat = y_hat.to(torch.float64)
        finite = torch.isfinite(y_hat)
        self.last_nonfinite = (~finite).any(dim=1).detach()
        args = [torch.where(finite, y_hat, 0.0)]
        f = self.family
        if f.m_eq:
            args.append(f.eq_rhs(xi))
            if "G" in self.varying:
                args.append(f.eq_lhs(xi))
        if f.m_ineq:
            args.append(f.ineq_rhs(xi))
            if "H" in self.varying:
                args.append(f.ineq_lhs(xi))
        try:
            (y,) = self._cvxpy[0](*args)
        except Exception as err:  # diffcp raises SolverError; name what was being solved
            raise RuntimeError(
                f"cvxpylayers projection ({self.solver_args['solve_method']}) failed on a batch of {len(xi)}: {err}"
            ) from err
        with torch.no_grad():  # the solver's word is not taken: its output is checked (see the module docstring)
            worst = torch.zeros(len(xi), dtype=torch.float64)
            if f.m_eq:
                worst = torch.maximum(worst, f.eq_resid(xi, y.detach()).abs().amax(dim=1))
            if f.m_ineq:
                worst = torch.maximum(worst, f.ineq_resid(xi, y.detach()).amax(dim=1))
            self.last_violation = worst
        return y

