"""DC line flows through a sparse factorisation of the bus susceptance matrix instead of the dense PTDF.

Why: the flows of nodal injections ``p`` are ``pf = Bf theta`` with ``Bbus theta = p`` (reference bus removed), so
``pf = Bf Bbus^-1 p = PTDF p``. The dense PTDF holds ``lines x buses`` floats (1.2 GB at case9241) and every call
streams all of it; ``Bbus`` has a few nonzeros a row and its sparse LU factor, made once per case, solves one
instance in well under a millisecond at 9,241 buses. Both give the same flows (to ~1e-12 relative, tested).

:class:`SparseFlows` holds the factor (:class:`SusceptanceFactor`: CHOLMOD through cholespy, SuperLU where Bbus is
not positive definite) and the sparse maps; its ``flows`` is differentiable (a :class:`torch.autograd.Function`: the
backward pass solves with the transpose, the same factor since Bbus is symmetric). :func:`pick_flows`
chooses between the factor and a dense PTDF for a case by timing both (``flows="auto"``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import torch

from hardlinear.problems.sparse_ptdf import susceptance_matrices

FLOW_MODES = ("auto", "sparse", "dense")


class SusceptanceFactor:
    """A factorisation of the reduced ``Bbus`` that solves many right-hand sides at once: CHOLMOD's Cholesky through
    cholespy (``Bbus`` is symmetric positive definite for positive susceptances), else SuperLU's LU (a case with a
    negative series reactance, or without cholespy). ``kind`` says which.

    Why both: SuperLU's solve of a ``(n, B)`` block in scipy took 0.15 ms a column at case118 (30x its one-column
    solve in a Python loop), while CHOLMOD solves the block at the one-column rate (9 ms for 1,024 columns there)."""

    def __init__(self, Bbus: sp.csc_matrix) -> None:
        self.n = Bbus.shape[0]
        self.kind, self._chol = "superlu", None
        try:
            from cholespy import CholeskySolverD, MatrixType

            C = Bbus.tocoo()
            rows, cols = (torch.as_tensor(v.astype(np.int32)) for v in (C.row, C.col))
            self._chol = CholeskySolverD(self.n, rows, cols, torch.as_tensor(C.data, dtype=torch.float64), MatrixType.COO)
            self.kind = "cholmod"
            if not self._solves(Bbus):  # CHOLMOD may return a factor of an indefinite matrix: check it solves
                self._chol, self.kind = None, "superlu"
        except (ImportError, ValueError, RuntimeError):  # not positive definite (CHOLMOD refuses it), or no cholespy
            self._chol = None
        if self._chol is None:
            self._lu = spla.splu(Bbus, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0, options={"SymmetricMode": True})

    def _solves(self, Bbus: sp.csc_matrix) -> bool:
        """Whether the factor solves ``Bbus`` to ``1e-10`` relative on a fixed random right-hand side."""
        x = torch.randn(2, self.n, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        rhs = torch.from_numpy(np.asarray(Bbus @ x.numpy().T).T)
        got = self.solve(rhs)
        return bool(torch.isfinite(got).all()) and float((got - x).abs().max()) <= 1e-10 * float(x.abs().max()) * max(1.0, self.n)

    def solve_columns(self, rhs: np.ndarray) -> np.ndarray:
        """``rhs: (n, B) -> Bbus^-1 rhs`` in float64 (``Bbus`` is symmetric: also its transpose's solve)."""
        if self._chol is not None:
            b = torch.from_numpy(np.ascontiguousarray(rhs, dtype=np.float64))
            out = torch.empty_like(b)
            self._chol.solve(b, out)
            return out.numpy()
        return self._lu.solve(np.asfortranarray(rhs, dtype=np.float64))

    def solve(self, p: torch.Tensor) -> torch.Tensor:
        """``p: (B, n) -> Bbus^-1 p`` row-wise (float64, CPU)."""
        return torch.from_numpy(self.solve_columns(p.detach().to("cpu", torch.float64).numpy().T).T)


class _Flows(torch.autograd.Function):
    """``u: (B, len(buses)) -> (B, len(lines))``, ``(Bl Bbus^-1 Inj u')'``; backward ``(Inj' Bbus^-1 Bl' g')'``
    (``Bbus`` is symmetric: the same factor)."""

    @staticmethod
    def forward(ctx, u: torch.Tensor, op: _FlowMaps) -> torch.Tensor:  # noqa: D102
        ctx.op = op
        return op.forward(u)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # noqa: D102
        return ctx.op.backward(grad), None


class _FlowMaps:
    """The three sparse maps of one set of injecting buses, applied column-wise in float64 on the CPU."""

    def __init__(self, Inj: sp.csr_matrix, Bl: sp.csr_matrix, factor: SusceptanceFactor) -> None:
        self.Inj, self.Inj_T, self.Bl, self.Bl_T, self.factor = Inj, Inj.T.tocsr(), Bl, Bl.T.tocsr(), factor

    @staticmethod
    def _cols(t: torch.Tensor) -> np.ndarray:
        return t.detach().to("cpu", torch.float64).numpy().T  # (features, B), a view of the row-major batch

    @staticmethod
    def _rows(a: np.ndarray, like: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a.T)).to(device=like.device, dtype=like.dtype)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        return self._rows(self.Bl @ self.factor.solve_columns(self.Inj @ self._cols(u)), u)

    def backward(self, g: torch.Tensor) -> torch.Tensor:
        return self._rows(self.Inj_T @ self.factor.solve_columns(self.Bl_T @ self._cols(g)), g)


class SparseFlows:
    """Flows on chosen lines of the injections at chosen buses, through the sparse factor of ``Bbus``.

    ``flows(u, buses)`` maps ``u: (B, len(buses))`` (an injection per listed bus; several entries may share a bus; the
    reference bus's are taken by the slack) to the flows ``(B, len(lines))``. Differentiable, any float dtype (the
    maps run in float64 on the CPU, column-wise: the injections ``Inj u'``, the solve, the lines' ``Bl theta``)."""

    def __init__(self, f_bus: np.ndarray, t_bus: np.ndarray, b: np.ndarray, nb: int, ref: int, lines: np.ndarray) -> None:
        Bf, Bbus, keep = susceptance_matrices(np.asarray(f_bus), np.asarray(t_bus), np.asarray(b, dtype=np.float64), nb, ref)
        self.nb, self.ref, self.lines = nb, ref, np.asarray(lines)
        self.factor = SusceptanceFactor(Bbus)
        self.position = np.full(nb, -1)
        self.position[keep] = np.arange(len(keep))  # a bus's row in the reduced system (-1: the reference)
        self.Bl = Bf[self.lines].tocsr()
        self._maps: dict[bytes, _FlowMaps] = {}

    def maps(self, buses: np.ndarray) -> _FlowMaps:
        """The maps for injections at ``buses`` (made once per list of buses)."""
        buses = np.asarray(buses, dtype=np.int64)
        key = buses.tobytes()
        if key not in self._maps:
            pos = self.position[buses]
            cols = np.flatnonzero(pos >= 0)
            Inj = sp.csr_matrix((np.ones(cols.size), (pos[cols], cols)), shape=(self.nb - 1, buses.size))
            self._maps[key] = _FlowMaps(Inj, self.Bl, self.factor)
        return self._maps[key]

    def flows(self, u: torch.Tensor, buses: np.ndarray) -> torch.Tensor:
        """``u: (B, len(buses)) -> (B, len(lines))``: ``PTDF[lines][:, buses] u``, through the factor."""
        return _Flows.apply(u, self.maps(buses))

    def ptdf_columns(self, buses: np.ndarray) -> np.ndarray:
        """``(len(lines), len(buses))`` PTDF columns by solves (for tests and checks; dense, so small cases only)."""
        return self.flows(torch.eye(len(buses), dtype=torch.float64), buses).T.numpy()


def best_of(fn: Callable[[], object], repeats: int = 5) -> float:
    """The fastest of ``repeats`` calls, seconds (after one warm-up call)."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def pick_flows(mode: str, device: torch.device | str, sparse_call: Callable[[], object], dense_call: Callable[[], object]) -> tuple[str, dict]:
    """``(chosen, timings)``: ``sparse`` or ``dense`` for ``mode`` (one of :data:`FLOW_MODES`). ``auto`` takes the
    dense product on a GPU (the factor solves on the CPU) and otherwise the faster of the two calls as measured
    here (fastest of 5 each: the same case's batch-1 flows both ways)."""
    if mode not in FLOW_MODES:
        raise ValueError(f"flows must be one of {FLOW_MODES}; got {mode!r}")
    if mode != "auto":
        return mode, {}
    if torch.device(device).type != "cpu":
        return "dense", {}
    timings = {"sparse_s": best_of(sparse_call), "dense_s": best_of(dense_call)}
    return ("sparse" if timings["sparse_s"] < timings["dense_s"] else "dense"), timings
