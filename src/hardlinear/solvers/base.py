"""One interface over the reference solvers: a model built once, right-hand sides updated per instance.

Every backend solves ``min 1/2 y'Qy + c'y  s.t.  G y = g,  H y <= h`` (the compact form) and returns a
:class:`SolveResult`. ``G, H`` may be replaced per instance (input-dependent left-hand sides).
Statuses are normalised to ``"optimal"`` or the backend's own word; nothing non-optimal is kept silently.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

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


MAX_SOLVER_THREADS = 1024
"""Most threads a solver option may ask for (Gurobi's ``Threads``); more is a typo or an attack, not a machine."""


@dataclass(frozen=True)
class Option:
    """One allowed solver option: its kind (``bool``, ``int``, ``float`` or ``str`` with ``choices``) and, for
    numbers, the closed range ``[lo, hi]`` (finite)."""

    kind: type
    lo: float = 0.0
    hi: float = float(2**31 - 1)
    choices: tuple[str, ...] = ()

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not valid for this option, or None."""
        if self.kind is bool:
            return None if isinstance(value, bool) else f"must be true or false; got {value!r}"
        if self.kind is str:
            return None if value in self.choices else f"must be one of {', '.join(self.choices)}; got {value!r}"
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or (self.kind is int and not isinstance(value, int)):
            return f"must be {'an integer' if self.kind is int else 'a number'}; got {value!r}"
        if not math.isfinite(value) or not self.lo <= value <= self.hi:
            return f"must be in [{self.lo:g}, {self.hi:g}]; got {value!r}"
        return None


def solver_option_problems(solver: str, options: Mapping[str, Any], allowed: Mapping[str, Option]) -> list[str]:
    """One line per option of ``options`` that ``solver`` does not allow (unknown, or a bad value).

    Why an allow-list: solver options reach the backend as they are (HiGHS's ``setOptionValue``, Gurobi's
    ``setParam``), and a backend has options that write files (HiGHS's ``solution_file``, ``log_file``; Gurobi's
    ``LogFile``, ``ResultFile``; SCS's ``write_data_filename``). A run config, and the config stored in a
    checkpoint, is data: it may tune a solver, never make it write, create or read a file."""
    lines = []
    for key, value in options.items():
        spec = allowed.get(key)
        if spec is None:
            names = ", ".join(sorted(allowed)) or "none"
            lines.append(f"solver {solver} has no option {key!r} that a config may set (allowed: {names}; options that "
                         "write or read files, logs or paths are never allowed)")
        elif (why := spec.problem(value)) is not None:
            lines.append(f"solver option {key} of {solver} {why}")
    return lines


def check_solver_options(solver: str, options: Mapping[str, Any], allowed: Mapping[str, Option]) -> None:
    """:class:`ValueError` listing every option ``solver`` does not allow (:func:`solver_option_problems`)."""
    lines = solver_option_problems(solver, options, allowed)
    if lines:
        raise ValueError("; ".join(lines))


TOLERANCE = Option(float, 0.0, 1.0)
SECONDS = Option(float, 0.0, 1e9)
COUNT = Option(int, 0)


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
    OPTIONS: ClassVar[dict[str, Option]] = {}
    """The options a caller may set (an allow-list, see :func:`solver_option_problems`); anything else is refused."""

    def __init__(self, Q: sp.spmatrix | None, c: np.ndarray, G: sp.spmatrix, H: sp.spmatrix, **options) -> None:
        check_solver_options(self.name, options, self.OPTIONS)
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
