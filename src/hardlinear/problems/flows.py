"""DC line flows through a sparse factorisation of the bus susceptance matrix instead of the dense PTDF.

Why: the flows of nodal injections ``p`` are ``pf = Bf theta`` with ``Bbus theta = p`` (reference bus removed), so
``pf = Bf Bbus^-1 p = PTDF p``. The dense PTDF holds ``lines x buses`` floats (1.2 GB at case9241) and every call
streams all of it; ``Bbus`` has a few nonzeros a row and its sparse LU factor, made once per case, solves one
instance in well under a millisecond at 9,241 buses. Both give the same flows (to ~1e-12 relative, tested).

:class:`SparseFlows` holds the factor and the maps; :func:`solve_susceptance` is the differentiable solve (a
:class:`torch.autograd.Function`: the backward pass solves with the transpose, the same factor). :func:`pick_flows`
chooses between the factor and a dense PTDF for a case by timing both (``flows="auto"``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import torch

FLOW_MODES = ("auto", "sparse", "dense")


def susceptance_matrices(f_bus: np.ndarray, t_bus: np.ndarray, b: np.ndarray, nb: int, ref: int) -> tuple[sp.csr_matrix, sp.csc_matrix, np.ndarray]:
    """``(Bf, Bbus, keep)``: the branch-bus ``Bf = diag(b) A`` and bus ``Bbus = A' diag(b) A`` susceptance matrices
    of the DC model with the reference bus's column (and row) removed, and the kept buses' indices."""
    nl = len(f_bus)
    rows = np.r_[np.arange(nl), np.arange(nl)]
    A = sp.csr_matrix((np.r_[np.ones(nl), -np.ones(nl)], (rows, np.r_[f_bus, t_bus])), shape=(nl, nb))
    keep = np.setdiff1d(np.arange(nb), [ref])
    Bf = (sp.diags(b) @ A).tocsc()[:, keep].tocsr()
    Bbus = (A.T @ sp.diags(b) @ A).tocsc()[keep][:, keep].tocsc()
    return Bf, Bbus, keep


class _Solve(torch.autograd.Function):
    """``theta = Bbus^-1 p`` row-wise for ``p: (B, nb - 1)``; backward ``Bbus^-T g`` with the same factor."""

    @staticmethod
    def forward(ctx, p: torch.Tensor, lu: spla.SuperLU) -> torch.Tensor:  # noqa: D102
        ctx.lu = lu
        return _apply(lu, p, "N")

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # noqa: D102
        return _apply(ctx.lu, grad, "T"), None


def _apply(lu: spla.SuperLU, p: torch.Tensor, trans: str) -> torch.Tensor:
    """One batched triangular solve pair on the CPU in float64, back in ``p``'s dtype and device."""
    rhs = p.detach().to("cpu", torch.float64).numpy().T
    out = lu.solve(np.ascontiguousarray(rhs), trans=trans)
    return torch.from_numpy(np.ascontiguousarray(out.T)).to(device=p.device, dtype=p.dtype)


def solve_susceptance(p: torch.Tensor, lu: spla.SuperLU) -> torch.Tensor:
    """``p: (B, nb - 1) -> theta: (B, nb - 1)`` with ``Bbus theta = p``, differentiable in ``p``."""
    return _Solve.apply(p, lu)


class SparseFlows:
    """Flows on chosen lines of the injections at chosen buses, through the sparse factor of ``Bbus``.

    ``flows(u)`` maps ``u: (B, len(buses))`` (an injection per listed bus, several entries may share a bus) to the
    flows ``(B, len(lines))``; ``flows_T`` is its adjoint. Differentiable, any float dtype (the solve runs in
    float64 on the CPU); the factor is SuperLU's with a symmetric ordering (``Bbus`` is symmetric)."""

    def __init__(self, f_bus: np.ndarray, t_bus: np.ndarray, b: np.ndarray, nb: int, ref: int, lines: np.ndarray) -> None:
        Bf, Bbus, keep = susceptance_matrices(np.asarray(f_bus), np.asarray(t_bus), np.asarray(b, dtype=np.float64), nb, ref)
        self.nb, self.ref, self.lines = nb, ref, np.asarray(lines)
        self.lu = spla.splu(Bbus, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0, options={"SymmetricMode": True})
        self.position = np.full(nb, -1)
        self.position[keep] = np.arange(len(keep))  # a bus's column in the reduced system (-1: the reference)
        Bl = Bf[self.lines]
        # each line's flow is b (theta_f - theta_t); the reference bus's angle is 0: its column points at a zero pad
        f, t = self.position[np.asarray(f_bus)[self.lines]], self.position[np.asarray(t_bus)[self.lines]]
        self._f = torch.as_tensor(np.where(f < 0, len(keep), f), dtype=torch.long)
        self._t = torch.as_tensor(np.where(t < 0, len(keep), t), dtype=torch.long)
        self._b = np.asarray(b, dtype=np.float64)[self.lines]
        self.Bl = Bl
        self._consts: dict = {}

    def _const(self, name: str, like: torch.Tensor) -> torch.Tensor:
        key = (name, like.device, like.dtype)
        if key not in self._consts:
            value = {"b": self._b}[name]
            self._consts[key] = torch.as_tensor(value, dtype=like.dtype, device=like.device)
        return self._consts[key]

    def injections(self, u: torch.Tensor, buses: np.ndarray) -> torch.Tensor:
        """``u: (B, len(buses)) -> p: (B, nb - 1)``, the reduced system's right-hand side (the reference bus's
        injection dropped: the slack takes it)."""
        pos = self.position[np.asarray(buses)]
        keep = pos >= 0
        index = torch.as_tensor(pos[keep], dtype=torch.long, device=u.device)
        cols = u if keep.all() else u[:, torch.as_tensor(np.flatnonzero(keep), device=u.device)]
        return u.new_zeros(u.shape[0], self.nb - 1).index_add(1, index, cols)

    def angles(self, p: torch.Tensor) -> torch.Tensor:
        """``p: (B, nb - 1) -> theta: (B, nb - 1)``."""
        return solve_susceptance(p, self.lu)

    def line_flows(self, theta: torch.Tensor) -> torch.Tensor:
        """``theta: (B, nb - 1) -> (B, len(lines))``: ``b (theta_f - theta_t)``."""
        padded = torch.cat([theta, theta.new_zeros(theta.shape[0], 1)], dim=1)
        f, t = self._f.to(theta.device), self._t.to(theta.device)
        return self._const("b", theta) * (padded.index_select(1, f) - padded.index_select(1, t))

    def flows(self, p: torch.Tensor) -> torch.Tensor:
        """``p: (B, nb - 1) -> (B, len(lines))``: ``Bf Bbus^-1 p`` on the chosen lines."""
        return self.line_flows(self.angles(p))

    def ptdf_columns(self, buses: np.ndarray) -> np.ndarray:
        """``(len(lines), len(buses))`` PTDF columns by solves (for tests and checks; dense, so small cases only)."""
        unit = torch.zeros(len(buses), self.nb - 1, dtype=torch.float64)
        pos = self.position[np.asarray(buses)]
        unit[np.flatnonzero(pos >= 0), pos[pos >= 0]] = 1.0
        return self.flows(unit).T.numpy()


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
