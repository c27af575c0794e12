"""One interface over the reference solvers: a model built once, right-hand sides updated per instance.

Every backend solves ``min 1/2 y'Qy + c'y  s.t.  G y = g,  H y <= h`` (the compact form) and returns a
:class:`SolveResult`. ``G, H`` may be replaced per instance (input-dependent left-hand sides).
Statuses are normalised to ``"optimal"`` or the backend's own word; nothing non-optimal is kept silently.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


class _Previous:
    """The type of :data:`PREVIOUS` (a sentinel: compared by identity, never mistaken for a start point)."""

    def __repr__(self) -> str:
        return "PREVIOUS"


# ``warm_start=PREVIOUS``: start from the backend's own state after its previous solve (HiGHS and Gurobi: the
# simplex basis, OSQP: its iterates), the fastest re-solve after a right-hand-side change; see
# ``supports_previous_state``. Not an independent solve: the benchmarks report it beside the cold one.
PREVIOUS = _Previous()


class SolverError(RuntimeError):
    """A solve that did not reach optimality, or a backend that refused the model."""


class SolverUnavailable(SolverError):
    """The backend is not installed, or its licence refuses the model (Gurobi's size limit)."""


@dataclass
class SolveResult:
    y: np.ndarray
    objective: float
    status: str
    time_s: float
    iterations: int

    @property
    def optimal(self) -> bool:
        return self.status == "optimal"


class QPSolver(ABC):
    """A backend holding one model; ``solve`` updates the data that changed and re-solves.

    ``warm_start`` (a primal point) is passed to backends that accept one (HiGHS, OSQP, Gurobi); the others
    ignore it, and ``supports_warm_start`` says which. ``warm_start=PREVIOUS`` keeps the state of the previous
    solve where ``supports_previous_state``; without a warm start every solve is cold (nothing carried over).
    """

    name: str = "solver"
    supports_warm_start: bool = False
    supports_previous_state: bool = False
    supports_quadratic: bool = True

    def __init__(self, Q: sp.spmatrix | None, c: np.ndarray, G: sp.spmatrix, H: sp.spmatrix, **options) -> None:
        self.Q = None if Q is None or sp.csr_matrix(Q).nnz == 0 else sp.csr_matrix(Q, dtype=np.float64)
        if self.Q is not None and not self.supports_quadratic:
            raise SolverUnavailable(f"{self.name} solves LPs only; use clarabel, osqp or gurobi for a QP")
        self.c = np.asarray(c, dtype=np.float64)
        self.G, self.H = sp.csr_matrix(G, dtype=np.float64), sp.csr_matrix(H, dtype=np.float64)
        self.options = options

    @abstractmethod
    def solve(
        self,
        g: np.ndarray,
        h: np.ndarray,
        G: sp.spmatrix | None = None,
        H: sp.spmatrix | None = None,
        warm_start: np.ndarray | None = None,
    ) -> SolveResult:
        """Solve with right-hand sides ``g, h`` (and new ``G, H`` if given)."""

    def objective_value(self, y: np.ndarray) -> float:
        value = float(self.c @ y)
        if self.Q is not None:
            value += 0.5 * float(y @ (self.Q @ y))
        return value
