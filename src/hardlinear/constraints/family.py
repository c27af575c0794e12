"""Linear constraint families C(x) and the input box X (DESIGN.md section 2).

Conventions shared by the whole package:

* ``xi`` is the paper's normalised input, shape ``(B, k)``, drawn from a box ``lo <= xi <= hi``
  (``[-1, 1]^k`` for every paper problem).
* ``x = (1, xi)`` is the lifted input, shape ``(B, k + 1)``, on which every right-hand side and every
  input-dependent matrix is affine: ``g(x) = B_eq x``, ``G(x) = sum_j x_j G_j``.
* ``C(x) = {y : G(x) y = g(x), H(x) y <= h(x)}``; residuals are ``G y - g`` and ``H y - h`` (``<= 0`` is
  feasible).

Two families implement the same batched interface:

* :class:`JointlyLinearFamily`: constant sparse ``G, H`` (DC-OPF);
* :class:`InputDependentFamily`: ``G(x), H(x)`` affine in ``x`` (the bond portfolio).

Torch copies of the matrices are made lazily per (device, dtype) and cached, so a family can be used in
float32 on a GPU and in float64 on the CPU at the same time.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from hardlinear.constraints.signed_rows import compact_affine, compact_affine_times, split_long_columns, split_times

# A dense torch copy is used below this many matrix entries, a sparse CSR one above: at batch sizes of a
# few hundred, dense matmul wins on CPU for the paper's cases; sparse keeps 2000-bus cases in memory.
DENSE_LIMIT = 4_000_000
# A large sparse H's columns with more entries than this go through BLAS as a dense block (split_long_columns),
# when that block holds at most SPLIT_FLOATS_PER_NONZERO floats per nonzero; the family's products and the layer's
# SlackOperator share the split (ConstraintFamily.long_column_split).
SPLIT_LONG_ABOVE = 4
SPLIT_FLOATS_PER_NONZERO = 3


def lift(xi: torch.Tensor) -> torch.Tensor:
    """``xi: (B, k) -> x = (1, xi): (B, k + 1)``."""
    return torch.cat([torch.ones_like(xi[:, :1]), xi], dim=1)


@dataclass(frozen=True)
class InputBox:
    """The input set X = {xi : lo <= xi <= hi} of the paper's normalised parameters."""

    lo: np.ndarray
    hi: np.ndarray

    def __post_init__(self) -> None:
        lo = np.asarray(self.lo, dtype=np.float64).reshape(-1)
        hi = np.asarray(self.hi, dtype=np.float64).reshape(-1)
        if lo.shape != hi.shape:
            raise ValueError(f"box bounds differ in length: lo {lo.shape}, hi {hi.shape}")
        if not np.all(np.isfinite(lo)) or not np.all(np.isfinite(hi)):
            raise ValueError("box bounds must be finite: the decision rule needs a compact input set")
        if np.any(lo > hi):
            raise ValueError(f"box has lo > hi at coordinates {np.flatnonzero(lo > hi)[:10].tolist()}")
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    @classmethod
    def symmetric(cls, k: int, radius: float = 1.0) -> InputBox:
        return cls(-radius * np.ones(k), radius * np.ones(k))

    @property
    def k(self) -> int:
        return int(self.lo.shape[0])

    @property
    def mid(self) -> np.ndarray:
        return 0.5 * (self.lo + self.hi)

    @property
    def radius(self) -> np.ndarray:
        return 0.5 * (self.hi - self.lo)

    def sample(
        self,
        n: int,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str = "cpu",
    ) -> torch.Tensor:
        """Uniform samples ``(n, k)``; the generator lives on the CPU so runs reproduce across devices."""
        u = torch.rand(n, self.k, generator=generator, dtype=torch.float64)
        lo = torch.as_tensor(self.lo)
        xi = lo + u * torch.as_tensor(self.hi - self.lo)
        return xi.to(device=device, dtype=dtype)

    def violation(self, xi: torch.Tensor) -> torch.Tensor:
        """Largest distance outside the box per row, ``(B, k) -> (B,)`` (0 inside)."""
        lo = torch.as_tensor(self.lo, dtype=xi.dtype, device=xi.device)
        hi = torch.as_tensor(self.hi, dtype=xi.dtype, device=xi.device)
        over = torch.clamp(torch.maximum(lo - xi, xi - hi), min=0.0)
        return over.amax(dim=1) if xi.shape[1] else torch.zeros(xi.shape[0], dtype=xi.dtype)

    def vertices(self, limit: int | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
        """All 2^k vertices (float64) when ``2^k <= limit`` (or no limit), else ``limit`` random ones."""
        k = self.k
        if limit is None or 2**k <= limit:
            bits = torch.tensor(np.array(np.meshgrid(*[[0, 1]] * k, indexing="ij")).reshape(k, -1).T)
        else:
            bits = torch.randint(0, 2, (limit, k), generator=generator)
        lo, hi = torch.as_tensor(self.lo), torch.as_tensor(self.hi)
        return torch.where(bits.bool(), hi, lo)


def _torch_matrix(mat: sp.spmatrix | np.ndarray, device: Any, dtype: torch.dtype) -> torch.Tensor:
    if sp.issparse(mat):
        if mat.shape[0] * mat.shape[1] <= DENSE_LIMIT:
            return torch.as_tensor(mat.toarray(), dtype=dtype, device=device)
        csr = sp.csr_matrix(mat)
        with warnings.catch_warnings():
            # torch's "sparse CSR support is in beta" notice, once per matrix: the products used here are tested
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
            return torch.sparse_csr_tensor(
                torch.as_tensor(csr.indptr, dtype=torch.int64),
                torch.as_tensor(csr.indices, dtype=torch.int64),
                torch.as_tensor(csr.data, dtype=dtype),
                size=csr.shape,
                check_invariants=False,  # scipy's CSR is valid by construction; saying so also silences torch's notice
            ).to(device)
    return torch.as_tensor(np.asarray(mat), dtype=dtype, device=device)


def sparse_coo(mat: sp.spmatrix, dtype: torch.dtype, device: Any = "cpu") -> torch.Tensor:
    """A scipy sparse matrix as a coalesced torch COO tensor (the layout whose products torch differentiates in the
    dense argument), its indices checked."""
    coo = sp.coo_matrix(mat)
    return torch.sparse_coo_tensor(np.vstack([coo.row, coo.col]).astype(np.int64), coo.data, coo.shape, dtype=dtype,
                                   device=device, check_invariants=True).coalesce()


def _rows_times(mat: torch.Tensor, y: torch.Tensor, mat_T: torch.Tensor | None = None) -> torch.Tensor:
    """``mat: (m, n), y: (B, n) -> (B, m)`` for dense or sparse ``mat``; a sparse ``mat``'s stored transpose
    ``mat_T`` serves the backward pass (:class:`_SparseRowsTimes`)."""
    if mat.layout == torch.strided:
        return y @ mat.T
    if mat_T is not None and y.requires_grad and torch.is_grad_enabled():
        return _SparseRowsTimes.apply(y, mat, mat_T)
    return (mat @ y.T).T


class _SparseRowsTimes(torch.autograd.Function):
    """``(mat @ y')'`` whose backward multiplies by a transpose made once. Why: torch transposes the sparse matrix
    on every backward pass: 86 ms of the 111 ms that PGLearn's dispatch's line rows took per step at case1888."""

    @staticmethod
    def forward(ctx, y: torch.Tensor, mat: torch.Tensor, mat_T: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
        ctx.mat_T = mat_T
        return (mat @ y.T).T

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:  # noqa: ANN001
        return (ctx.mat_T @ grad.T).T, None, None


def _rhs_matrix(B, rows: int, k: int) -> np.ndarray:
    """A right-hand-side matrix ``(rows, k + 1)`` in float64; an empty one (no rows) gets its ``k + 1`` columns."""
    B = np.asarray(B, dtype=np.float64)
    return np.zeros((0, k + 1)) if rows == 0 and B.size == 0 else B.reshape(rows, -1)


@dataclass
class ConstraintFamily(ABC):
    """Batched evaluation of C(x); subclasses fix how G(x), H(x) depend on x."""

    box: InputBox
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    n: int = field(init=False)
    m_eq: int = field(init=False)
    m_ineq: int = field(init=False)

    @property
    def k(self) -> int:
        return self.box.k

    def _t(self, name: str, like: torch.Tensor, transpose: bool = False) -> torch.Tensor:
        """The array ``name`` (its transpose with ``transpose``) as a tensor like ``like``, made once."""
        key = (name, like.device, like.dtype, transpose)
        if key not in self._cache:
            mat = getattr(self, name)
            self._cache[key] = _torch_matrix(mat.T if transpose else mat, like.device, like.dtype)
        return self._cache[key]

    def cached(self, key: Any, build: Callable[[], Any]) -> Any:
        """``build()``, made once per family and ``key``: arrays derived from the family that the family and the
        layers built from it share (:meth:`compact_rhs`, :meth:`long_column_split`)."""
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    def compact_rhs(self) -> dict[str, np.ndarray]:
        """:func:`~hardlinear.constraints.signed_rows.compact_affine` of ``B_ineq``, made once (its rows are hashed one by one)."""
        return self.cached("B_ineq compact", lambda: compact_affine(np.asarray(self.B_ineq, dtype=np.float64)))

    def long_column_split(self, H: sp.spmatrix) -> dict | None:
        """:func:`~hardlinear.constraints.signed_rows.split_long_columns` of the family's constant ``H`` (given: its sparse
        form), made once per threshold."""
        key = ("H split", SPLIT_LONG_ABOVE, SPLIT_FLOATS_PER_NONZERO)
        return self.cached(key, lambda: split_long_columns(H, SPLIT_LONG_ABOVE, SPLIT_FLOATS_PER_NONZERO))

    def _affine_rhs(self, xi: torch.Tensor) -> torch.Tensor:
        """``h(x) = B_ineq (1, xi)``; a large ``B_ineq`` kept compact, each input-reading row once up to sign
        (:meth:`compact_rhs`)."""
        if self.B_ineq.size <= DENSE_LIMIT:
            return lift(xi) @ self._t("B_ineq", xi).T
        key = ("B_ineq compact", xi.device, xi.dtype)
        if key not in self._cache:
            arrays = self.compact_rhs()
            self._cache[key] = tuple(
                torch.as_tensor(arrays[name], device=xi.device, dtype=torch.long if name in ("rows", "index") else xi.dtype)
                for name in ("b0", "U_T", "sign", "rows", "index"))
        return compact_affine_times(xi, *self._cache[key])

    def _sparse_T(self, name: str, like: torch.Tensor) -> torch.Tensor | None:
        """The transpose of a sparse-stored ``name`` for :func:`_rows_times`'s backward pass; None when dense."""
        return self._t(name, like, transpose=True) if self._t(name, like).layout != torch.strided else None

    # --- batched torch interface -------------------------------------------------------------
    @abstractmethod
    def eq_resid(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k), y: (B, n) -> G(x) y - g(x): (B, m_eq)``."""

    @abstractmethod
    def ineq_resid(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k), y: (B, n) -> H(x) y - h(x): (B, m_ineq)``; ``<= 0`` is feasible."""

    @abstractmethod
    def eq_rhs(self, xi: torch.Tensor) -> torch.Tensor:
        """``(B, k) -> g(x): (B, m_eq)``."""

    @abstractmethod
    def ineq_rhs(self, xi: torch.Tensor) -> torch.Tensor:
        """``(B, k) -> h(x): (B, m_ineq)``."""

    # --- one instance in numpy, for solvers ---------------------------------------------------
    @abstractmethod
    def instance(self, xi: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray, sp.csr_matrix, np.ndarray]:
        """``xi: (k,) -> (G, g, H, h)`` in float64 with sparse matrices."""

    @property
    @abstractmethod
    def input_dependent_lhs(self) -> bool:
        """Whether G, H depend on x (decides which decision rule and projection apply)."""


@dataclass
class JointlyLinearFamily(ConstraintFamily):
    """Constant ``G, H``; right-hand sides ``g = B_eq x``, ``h = B_ineq x`` with ``x = (1, xi)``."""

    G: sp.csr_matrix = None  # type: ignore[assignment]
    B_eq: np.ndarray = None  # type: ignore[assignment]
    H: sp.csr_matrix = None  # type: ignore[assignment]
    B_ineq: np.ndarray = None  # type: ignore[assignment]
    # The input set is the polytope when one is given (hardlinear.constraints.polytope; ``box`` is then its bounding box)
    polytope: Any = None

    def __post_init__(self) -> None:
        if self.polytope is not None and self.polytope.k != self.k:
            raise ValueError(f"the input polytope has {self.polytope.k} inputs but the box has {self.k}")
        self.G = sp.csr_matrix(self.G, dtype=np.float64)
        self.H = sp.csr_matrix(self.H, dtype=np.float64)
        self.B_eq = _rhs_matrix(self.B_eq, self.G.shape[0], self.k)
        self.B_ineq = _rhs_matrix(self.B_ineq, self.H.shape[0], self.k)
        self.n = self.G.shape[1]
        self.m_eq, self.m_ineq = self.G.shape[0], self.H.shape[0]
        if self.H.shape[1] != self.n:
            raise ValueError(f"G has {self.n} columns but H has {self.H.shape[1]}")
        for name, mat in (("B_eq", self.B_eq), ("B_ineq", self.B_ineq)):
            if mat.shape[1] != self.k + 1:
                raise ValueError(f"{name} must have k + 1 = {self.k + 1} columns (x = (1, xi)); got {mat.shape[1]}")

    @property
    def input_dependent_lhs(self) -> bool:
        return False

    def eq_rhs(self, xi: torch.Tensor) -> torch.Tensor:
        return lift(xi) @ self._t("B_eq", xi).T

    def ineq_rhs(self, xi: torch.Tensor) -> torch.Tensor:
        return self._affine_rhs(xi)

    def eq_resid(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return _rows_times(self._t("G", y), y, self._sparse_T("G", y)) - self.eq_rhs(xi.to(y.dtype))

    def ineq_resid(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        split = self._split_H(y)
        Hy = _rows_times(self._t("H", y), y, self._sparse_T("H", y)) if split is None else split_times(y, *split)
        return Hy - self.ineq_rhs(xi.to(y.dtype))

    def _split_H(self, like: torch.Tensor) -> tuple | None:
        """A large ``H`` whose long columns are full enough as :func:`~hardlinear.constraints.signed_rows.split_long_columns`'s
        parts, as tensors like ``like`` (the arguments of ``split_times`` after ``y``); None for the others."""
        key = ("H split", like.device, like.dtype)
        if key not in self._cache:
            parts = None
            if sp.issparse(self.H) and self.H.shape[0] * self.H.shape[1] > DENSE_LIMIT:
                parts = self.long_column_split(sp.csr_matrix(self.H))
            if parts is not None:
                as_long = lambda a: torch.as_tensor(a, dtype=torch.long, device=like.device)  # noqa: E731
                parts = (sparse_coo(parts["rest"], like.dtype, like.device),
                         torch.as_tensor(parts["block_T"], dtype=like.dtype, device=like.device),
                         torch.as_tensor(parts["sign"], dtype=like.dtype, device=like.device),
                         as_long(parts["index"]), as_long(parts["rows"]), as_long(parts["cols"]))
            self._cache[key] = parts
        return self._cache[key]

    def instance(self, xi: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray, sp.csr_matrix, np.ndarray]:
        x = np.concatenate([[1.0], np.asarray(xi, dtype=np.float64).reshape(-1)])
        return self.G, self.B_eq @ x, self.H, self.B_ineq @ x


@dataclass
class InputDependentFamily(ConstraintFamily):
    """``G(x) = sum_j x_j G_j``, ``H(x) = sum_j x_j H_j`` (j = 0..k, x_0 = 1); RHS ``B x``.

    ``G_stack: (k + 1, m_eq, n)`` and ``H_stack: (k + 1, m_ineq, n)`` are dense: the families of this
    kind that the paper studies are small, and the batched projection needs dense ``G(x)`` anyway.
    """

    G_stack: np.ndarray = None  # type: ignore[assignment]
    B_eq: np.ndarray = None  # type: ignore[assignment]
    H_stack: np.ndarray = None  # type: ignore[assignment]
    B_ineq: np.ndarray = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        self.G_stack = np.asarray(self.G_stack, dtype=np.float64)
        self.H_stack = np.asarray(self.H_stack, dtype=np.float64)
        _, self.m_eq, self.n = self.G_stack.shape
        self.m_ineq = self.H_stack.shape[1]
        self.B_eq = _rhs_matrix(self.B_eq, self.m_eq, self.k)
        self.B_ineq = _rhs_matrix(self.B_ineq, self.m_ineq, self.k)
        for name, arr in (("G_stack", self.G_stack), ("H_stack", self.H_stack)):
            if arr.shape[0] != self.k + 1:
                raise ValueError(f"{name} needs k + 1 = {self.k + 1} slices; got {arr.shape[0]}")
        if self.H_stack.shape[2] != self.n:
            raise ValueError("G_stack and H_stack disagree on n")

    @property
    def input_dependent_lhs(self) -> bool:
        return True

    def eq_lhs(self, xi: torch.Tensor) -> torch.Tensor:
        """``(B, k) -> G(x): (B, m_eq, n)``."""
        return torch.einsum("bj,jmn->bmn", lift(xi), self._t("G_stack", xi))

    def ineq_lhs(self, xi: torch.Tensor) -> torch.Tensor:
        """``(B, k) -> H(x): (B, m_ineq, n)``."""
        return torch.einsum("bj,jmn->bmn", lift(xi), self._t("H_stack", xi))

    def eq_rhs(self, xi: torch.Tensor) -> torch.Tensor:
        return lift(xi) @ self._t("B_eq", xi).T

    def ineq_rhs(self, xi: torch.Tensor) -> torch.Tensor:
        return self._affine_rhs(xi)

    def eq_resid(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        xi = xi.to(y.dtype)
        return torch.einsum("bmn,bn->bm", self.eq_lhs(xi), y) - self.eq_rhs(xi)

    def ineq_resid(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        xi = xi.to(y.dtype)
        return torch.einsum("bmn,bn->bm", self.ineq_lhs(xi), y) - self.ineq_rhs(xi)

    def instance(self, xi: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray, sp.csr_matrix, np.ndarray]:
        x = np.concatenate([[1.0], np.asarray(xi, dtype=np.float64).reshape(-1)])
        G = np.tensordot(x, self.G_stack, axes=1)
        H = np.tensordot(x, self.H_stack, axes=1)
        return sp.csr_matrix(G), self.B_eq @ x, sp.csr_matrix(H), self.B_ineq @ x


def constant_variable_bounds(family: ConstraintFamily) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)``, each ``(n,)``: the bounds on single variables that hold for every input, read from the rows
    with one nonzero coefficient and a constant right-hand side (``a y_j <= h``; ``a y_j = g`` fixes ``y_j``);
    ``-inf`` / ``inf`` where no such row bounds a variable, and everywhere for an input-dependent family. Other
    rows may bound the variables further; these are only the box the family states outright."""
    lo, hi = np.full(family.n, -np.inf), np.full(family.n, np.inf)
    if not isinstance(family, JointlyLinearFamily):
        return lo, hi
    for rows, rhs, equal in ((family.H, family.B_ineq, False), (family.G, family.B_eq, True)):
        rows = sp.csr_matrix(rows)
        single = (np.diff(rows.indptr) == 1) & ~np.any(rhs[:, 1:] != 0, axis=1)
        for i in np.flatnonzero(single):
            j, a = rows.indices[rows.indptr[i]], rows.data[rows.indptr[i]]
            if a == 0:
                continue
            value = rhs[i, 0] / a
            if equal or a > 0:
                hi[j] = min(hi[j], value)
            if equal or a < 0:
                lo[j] = max(lo[j], value)
    return lo, hi


def standard_form(compact: ConstraintFamily) -> ConstraintFamily:
    """The paper's standard form of a compact family: one slack per inequality row.

    Variables become ``(y, s)``; equalities ``G y = g`` and ``H y + s = h``; inequalities ``-s <= 0``.
    """
    m, n = compact.m_ineq, compact.n
    if isinstance(compact, JointlyLinearFamily):
        G = sp.bmat([[compact.G, None], [compact.H, sp.identity(m)]], format="csr")
        if compact.m_eq == 0:
            G = sp.hstack([compact.H, sp.identity(m)], format="csr")
        H = sp.hstack([sp.csr_matrix((m, n)), -sp.identity(m)], format="csr")
        return JointlyLinearFamily(
            box=compact.box,
            G=G,
            B_eq=np.vstack([compact.B_eq, compact.B_ineq]),
            H=H,
            B_ineq=np.zeros((m, compact.k + 1)),
            polytope=compact.polytope,
        )
    if isinstance(compact, InputDependentFamily):
        k1 = compact.k + 1
        slack_eq = np.zeros((k1, compact.m_eq, m))
        slack_ineq = np.zeros((k1, m, m))
        slack_ineq[0] = np.eye(m)
        G_stack = np.concatenate(
            [
                np.concatenate([compact.G_stack, slack_eq], axis=2),
                np.concatenate([compact.H_stack, slack_ineq], axis=2),
            ],
            axis=1,
        )
        H_stack = np.zeros((k1, m, n + m))
        H_stack[0, :, n:] = -np.eye(m)
        return InputDependentFamily(
            box=compact.box,
            G_stack=G_stack,
            B_eq=np.vstack([compact.B_eq, compact.B_ineq]),
            H_stack=H_stack,
            B_ineq=np.zeros((m, k1)),
        )
    raise TypeError(f"no standard form for {type(compact).__name__}")
