"""The batched problem interface every method and metric uses (DESIGN.md sections 2 and 3).

A problem is a compact constraint family over the original variables (``G y = g, H y <= h``), an objective
(linear or convex quadratic), and a *form*:

* ``standard`` (the paper's): a slack per inequality row is appended to ``y``; the equalities become
  ``G y = g, H y + s = h`` and the inequalities ``s >= 0``;
* ``inequality``: the compact family as it is.

``n, m_eq, m_ineq, k`` are counted as the paper counts them: in the standard form ``n`` includes the slacks
and ``m_eq`` counts the original equalities only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp
import torch

from hardlinear.constraints.family import ConstraintFamily, InputBox, standard_form

Form = Literal["standard", "inequality"]
ObjectiveKind = Literal["lp", "qp"]  # what a configurable problem (DC-OPF, portfolio) offers
FORMS = ("standard", "inequality")
OBJECTIVES = ("lp", "qp", "nonconvex")  # what a problem can be (nonconvex: DC3's sine objective)


@dataclass(frozen=True)
class Objective:
    """``f(y) = 1/2 y' Q y + c' y + s' sin(y)`` on the original variables; ``Q`` is None for a linear objective,
    ``sine`` (``s``) None but for DC3's nonconvex problem, which only a local NLP solver handles."""

    c: np.ndarray
    Q: sp.csr_matrix | None = None
    sine: np.ndarray | None = None

    @property
    def is_quadratic(self) -> bool:
        return self.Q is not None and self.Q.nnz > 0

    @property
    def is_nonconvex(self) -> bool:
        return self.sine is not None


class Problem:
    """A parametric LP/QP with linear constraints, seen through the batched interface.

    Subclasses build ``compact`` (a :class:`ConstraintFamily` over the ``n_orig`` original variables) and
    ``objective_data``; everything else (the form, sizes, residuals, sampling, solving) lives here.
    """

    name: str = "problem"
    def __init__(
        self,
        compact: ConstraintFamily,
        objective_data: Objective,
        objective: str,
        form: Form,
        name: str,
    ) -> None:
        if form not in FORMS:
            raise ValueError(f"form must be one of {FORMS}; got {form!r}")
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}; got {objective!r}")
        self.name = name
        self.compact = compact
        self.objective_kind: str = objective
        self.form: Form = form
        self.objective_data = objective_data
        self.family = standard_form(compact) if form == "standard" else compact
        self._t_cache: dict = {}
        # Fixed inputs (N, k) per split ("train", "val", "test") that replace seeded samples, e.g. DC3's
        # published split or a user's own; empty for problems sampled from the box only.
        self.given_inputs: dict[str, np.ndarray] = {}

    # --- sizes, as the paper counts them --------------------------------------------------------
    @property
    def n_orig(self) -> int:
        return self.compact.n

    @property
    def n(self) -> int:
        return self.family.n

    @property
    def m_eq(self) -> int:
        return self.compact.m_eq

    @property
    def m_ineq(self) -> int:
        return self.compact.m_ineq

    @property
    def k(self) -> int:
        return self.compact.k

    @property
    def box(self) -> InputBox:
        return self.compact.box

    def decision_indices(self) -> np.ndarray:
        """Positions (in the form's ``n`` variables) of what a supervised network predicts as the decision: all
        original variables by default (no slacks); DC-OPF overrides it with the generator outputs."""
        return np.arange(self.n_orig)

    def sizes(self) -> dict[str, int]:
        return {"n": self.n, "m_eq": self.m_eq, "m_ineq": self.m_ineq, "k": self.k}

    # --- batched interface ----------------------------------------------------------------------
    def sample(self, n: int, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """``n`` inputs ``(n, k)`` drawn uniformly from the box."""
        return self.box.sample(n, generator=generator, dtype=dtype)

    def eq_resid(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k), y: (B, n) -> (B, rows)``: ``G y - g`` of the problem's form."""
        return self.family.eq_resid(xi, y)

    def ineq_resid(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k), y: (B, n) -> (B, m_ineq)``: ``H y - h`` of the problem's form (``<= 0`` feasible)."""
        return self.family.ineq_resid(xi, y)

    def objective(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k), y: (B, n) -> (B,)``, the objective on the original variables."""
        y0 = y[:, : self.n_orig]
        c = self._tensor("c", self.objective_data.c, y)
        value = y0 @ c
        if self.objective_data.is_quadratic:
            Q = self._tensor("Q", self.objective_data.Q.toarray(), y)
            value = value + 0.5 * ((y0 @ Q) * y0).sum(dim=1)
        if self.objective_data.is_nonconvex:
            value = value + torch.sin(y0) @ self._tensor("sine", self.objective_data.sine, y)
        return value

    def to_form(self, xi: torch.Tensor, y_orig: torch.Tensor) -> torch.Tensor:
        """Original variables ``(B, n_orig)`` to the form's ``(B, n)``: appends slacks ``h - H y``."""
        if self.form == "inequality":
            return y_orig
        slack = -self.compact.ineq_resid(xi.to(y_orig.dtype), y_orig)
        return torch.cat([y_orig, slack], dim=1)

    def from_form(self, y: torch.Tensor) -> torch.Tensor:
        """``(B, n) -> (B, n_orig)``."""
        return y[:, : self.n_orig]

    def solve(self, xi: torch.Tensor | np.ndarray, solver: str | None = None, progress: bool = False, **options):
        """Reference solutions for a batch of inputs, in the problem's form; see :mod:`hardlinear.solvers`."""
        from hardlinear.solvers import solve_batch

        return solve_batch(self, xi, solver=solver, progress=progress, **options)

    def resolve_lazy_rows(self, lazy_rows: bool | None, solver: str) -> bool:
        """Whether reference solves by ``solver`` add rows lazily (``data.lazy_rows``; None: the problem's default).
        Only problems with :meth:`lazy_reference` offer it (the economic dispatch); asking for it elsewhere is an
        error naming the fix."""
        if lazy_rows:
            raise ValueError(
                f"{self.name} has no lazy rows (data.lazy_rows=true is for problem=ed, whose line rows are added as "
                "they are violated); use data.lazy_rows=null"
            )
        return False

    def lazy_reference(self, **options):  # noqa: ANN201 - an instance solver, see hardlinear.solvers.SolveJob
        """What solves one instance with lazy rows (``solve(xi) -> SolveResult``); only where
        :meth:`resolve_lazy_rows` can say yes."""
        raise NotImplementedError(f"{self.name} has no lazy reference solves")

    def default_solver(self) -> str:
        """The solver that is exact for the problem class: HiGHS for LPs, Clarabel for QPs; a local NLP solver
        (SLSQP, not guaranteed global) for a nonconvex objective."""
        if self.objective_data.is_nonconvex:
            return "slsqp"
        return "clarabel" if self.objective_data.is_quadratic else "highs"

    def inputs_for(self, split: str) -> np.ndarray | None:
        """The fixed inputs ``(N, k)`` of ``split``, or None when the split is sampled from the box."""
        return self.given_inputs.get(split)

    # --- helpers ------------------------------------------------------------------------------
    def _tensor(self, key: str, value: np.ndarray | Callable[[], np.ndarray], like: torch.Tensor) -> torch.Tensor:
        """The constant ``value`` as a tensor like ``like``, made once per key, device and dtype. Pass a callable
        where building the array is itself costly (a slice of a large matrix): it runs only on the first call."""
        cache_key = (key, like.device, like.dtype)
        if cache_key not in self._t_cache:
            array = value() if callable(value) else value
            self._t_cache[cache_key] = torch.as_tensor(np.asarray(array), dtype=like.dtype, device=like.device)
        return self._t_cache[cache_key]

    def describe(self) -> str:
        s = self.sizes()
        return f"{self.name} ({self.objective_kind}, {self.form}): n={s['n']} m_eq={s['m_eq']} m_ineq={s['m_ineq']} k={s['k']}"

    def identity(self) -> dict[str, str]:
        """Columns that identify the problem in a results row (``uncertainty``: the input box's level, where the
        problem has one, so that runs of one case at several levels stay apart)."""
        level = getattr(self, "uncertainty", None)
        return {"problem": self.name, "objective": self.objective_kind, "form": self.form, **({"uncertainty": level} if level is not None else {})}

    def fingerprint(self) -> str:
        """SHA-256 of every array that defines the problem (constraints and objective): the datasets' cache key."""
        import hashlib

        h = hashlib.sha256(self.constraints_fingerprint().encode())
        parts: list[np.ndarray] = [self.objective_data.c]
        if self.objective_data.is_quadratic:
            Q = sp.csr_matrix(self.objective_data.Q)
            parts += [Q.indptr, Q.indices, Q.data]
        if self.objective_data.is_nonconvex:
            parts.append(np.asarray(self.objective_data.sine, dtype=np.float64))
        for arr in parts:
            h.update(np.ascontiguousarray(arr).tobytes())
        h.update(self.objective_kind.encode())
        return h.hexdigest()

    def constraints_fingerprint(self) -> str:
        """SHA-256 of the input box, the constraint arrays and the form: the decision rules' cache key (a rule
        depends on the constraints only, so the LP and QP variants of a problem share one)."""
        import hashlib

        h = hashlib.sha256()
        fam = self.compact
        parts: list[np.ndarray] = [fam.box.lo, fam.box.hi]
        for name in ("G", "H", "G_stack", "H_stack", "B_eq", "B_ineq"):
            arr = getattr(fam, name, None)
            if arr is None:
                continue
            if sp.issparse(arr):
                arr = sp.csr_matrix(arr)
                parts += [arr.indptr, arr.indices, arr.data, np.asarray(arr.shape)]
            else:
                parts += [np.asarray(arr), np.asarray(np.shape(arr))]
        if getattr(fam, "polytope", None) is not None:  # an input polytope (hardlinear.constraints.polytope) is part of the set
            parts += fam.polytope.fingerprint_parts()
        for arr in parts:
            h.update(np.ascontiguousarray(arr).tobytes())
        h.update(self.form.encode())
        return h.hexdigest()
