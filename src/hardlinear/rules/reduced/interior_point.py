"""The structured primal-dual interior point on one working set (step 3 of :mod:`hardlinear.rules.reduced`).

:func:`solve_working_set` runs Mehrotra's predictor-corrector on the working-set LP (:class:`_WorkingSet`; its
iterates are :class:`_Point`). Each Newton system is eliminated input by input (:class:`_NormalSolver`: the blocks
``M' diag(delta_j) M`` from the rows' :func:`packed_outer_products` in one GEMM, a batched Cholesky, the spread
rows' Schur complement, an LU of what is left), then solved exactly by conjugate gradients preconditioned by that
elimination (:func:`_pcg`). ``device`` runs these kernels through torch on a GPU (:func:`device_budget` sizes the
caches there). Row generation reaches in only through ``probe``, the callback that stops a solve at an iterate.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from hardlinear.rules.progress import report
from hardlinear.rules.reduced.settings import (
    CHUNK_BYTES,
    DEVICE_CHUNK_BYTES,
    DEVICE_FACTOR_SHARE,
    DEVICE_PACKED_SHARE,
    DUAL_REGULARIZATION,
    DUAL_TOL,
    EXACT_PCG_ITERATIONS,
    FACTOR_BUDGET_BYTES,
    IPM_TOL,
    MAX_IPM_ITERATIONS,
    PACKED_BYTES,
    PCG_ITERATIONS,
    PRIMAL_REGULARIZATION,
    PROBE_GAP,
    REGULARIZATION,
    STALL_GAP,
    START_SPREAD,
)

log = logging.getLogger(__name__)


@dataclass
class _WorkingSet:
    """The working-set LP's data: ``M: (E, d)``, ``C: (E, q)``, right-hand sides and weights; ``two`` marks
    expressions with a lower row."""

    M: np.ndarray
    C: np.ndarray
    R_up: np.ndarray
    R_lo: np.ndarray
    w: np.ndarray
    two: np.ndarray

    @property
    def sizes(self) -> tuple[int, int, int]:
        return self.M.shape[1], self.C.shape[1], self.M.shape[0]


class _Point:
    """Primal ``x = (W0: d, t, W: (q, d), U: (q, E))``, slacks and duals of the rows
    ``a: (q, E)``, ``b: (q, E)``, ``up: (E,)``, ``lo: (E2,)``."""

    def __init__(self, W0, t, W, U):
        self.W0, self.t, self.W, self.U = W0, t, W, U

    def axpy(self, alpha, other):
        return _Point(self.W0 + alpha * other.W0, self.t + alpha * other.t, self.W + alpha * other.W, self.U + alpha * other.U)


def _slacks(ws: _WorkingSet, x: _Point) -> dict[str, np.ndarray]:
    """``b - A x`` for every row group."""
    MW = x.W @ ws.M.T  # (q, E)
    MW0 = ws.M @ x.W0
    colsum = x.U.sum(axis=0)
    return {
        "a": x.U - MW - ws.C.T,
        "b": x.U + MW + ws.C.T,
        "up": ws.R_up - colsum - MW0 - ws.w * x.t,
        "lo": (ws.R_lo - colsum + MW0 - ws.w * x.t)[ws.two],
    }


def _AT(ws: _WorkingSet, y: dict[str, np.ndarray]) -> _Point:
    """``A' y`` in the primal layout."""
    ylo = np.zeros_like(y["up"]) if isinstance(y["up"], np.ndarray) else y["up"].new_zeros(y["up"].shape)  # or a tensor
    ylo[ws.two] = y["lo"]
    return _Point(
        ws.M.T @ (y["up"] - ylo),
        float(ws.w @ (y["up"] + ylo)),
        (y["a"] - y["b"]) @ ws.M,
        -y["a"] - y["b"] + (y["up"] + ylo)[None, :],
    )


def _A(ws: _WorkingSet, x: _Point) -> dict[str, np.ndarray]:
    """``A x`` per row group (the linear part of ``_slacks`` with the opposite sign)."""
    MW = x.W @ ws.M.T
    MW0 = ws.M @ x.W0
    colsum = x.U.sum(axis=0)
    return {"a": MW - x.U, "b": -MW - x.U, "up": colsum + MW0 + ws.w * x.t, "lo": (colsum - MW0 + ws.w * x.t)[ws.two]}


@dataclass
class PackedOuterProducts:
    """``values: (E, d (d + 1) / 2)`` with row ``e`` the lower triangle of ``m_e m_e'``; ``rows``, ``cols`` its
    positions. ``delta @ values`` is then every block's ``M' diag(delta_j) M`` (lower triangle) in one GEMM."""

    values: Any
    rows: Any
    cols: Any


def packed_outer_products(M: np.ndarray, budget_bytes: float = PACKED_BYTES, device: Any = None) -> PackedOuterProducts | None:
    """The packed outer products of the rows of ``M: (E, d)``, or None when they exceed ``budget_bytes``;
    on ``device`` (a ``torch.device``; None: CPU tensors sharing ``M``'s memory, today's path)."""
    import torch

    E, d = M.shape
    if E * d * (d + 1) / 2 * 8 > budget_bytes:
        return None
    rows, cols = torch.tril_indices(d, d, device=device)
    M_t = torch.from_numpy(M) if device is None else torch.as_tensor(M, device=device)
    return PackedOuterProducts(M_t[:, rows] * M_t[:, cols], rows, cols)


def device_budget(device: Any, default: float, share: float) -> float:
    """Bytes a cached array may take: ``default``, or on a CUDA device ``share`` of its free memory if larger."""
    if device is None or device.type != "cuda":
        return default
    import torch

    return max(default, share * torch.cuda.mem_get_info(device)[0])


class _NormalSolver:
    """Solves ``(A' D A + eps I_W) dx = r`` for one ``D`` by block elimination (see :mod:`hardlinear.rules.reduced`).

    Every kernel of the factorisation is one large float64 GEMM per chunk of inputs: the blocks'
    ``S_j = M' diag(delta_j) M`` as ``delta @ KR`` (``KR: (E, d (d + 1) / 2)``, the rows' packed outer products
    ``m_e m_e'``, built once per working set by :func:`packed_outer_products`), a batched Cholesky and inverse,
    and the spread rows' Schur complement ``Psi = sum_j diag(QP_j) M S_j^{-1} M' diag(QP_j)`` as two GEMMs over
    the stacked inverses.

    ``device``: None (the default path) runs these kernels as CPU torch ops on the numpy arrays' memory; a
    ``torch.device`` runs them there (the torch backend): the per-input scalings ``(q, E)`` are sent once per
    Newton step, the spread rows' ``E x E`` Schur complement comes back for the host's LU, and :meth:`pcg` runs
    every conjugate-gradient iteration there (the exact operator, the block solves; ``m_s + d + 1`` numbers
    cross for the LU per preconditioner solve): a direction sends its right-hand side and fetches ``dx``. The backend
    keeps ``L_j^{-1}`` (a batched triangular solve) instead of ``S_j^{-1}`` and forms ``Psi`` as
    ``sum_j Z_j' Z_j`` with ``Z_j = L_j^{-1} M' diag(QP_j)``: batched triangular solves and GEMMs only, float64
    throughout; on a GPU it takes chunks of ``DEVICE_CHUNK_BYTES`` and may keep larger factors
    (:func:`device_budget`)."""

    def __init__(
        self, ws: _WorkingSet, D: dict[str, np.ndarray], eps: float, rho: float, KR: Any = None,
        timers: dict[str, float] | None = None, device: Any = None,
    ):
        import torch

        self.torch, self.ws, self.eps, self.device = torch, ws, eps + rho, device
        self.timers = timers if timers is not None else {}
        d, q, E = ws.sizes
        Da, Db = D["a"], D["b"]
        self.P = Da + Db + rho  # U's diagonal (rho: the proximal term on U)
        self.QP = (Db - Da) / self.P
        delta = (4.0 * Da * Db + rho * (Da + Db)) / self.P  # (q, E): P - Q^2 / P without cancellation
        gpu = device is not None and device.type != "cpu"
        self.chunk = max(1, int((DEVICE_CHUNK_BYTES if gpu else CHUNK_BYTES) // (8 * max(1, d * max(d, E)))))
        self.keep = q * d * d * 8 <= device_budget(device, FACTOR_BUDGET_BYTES, DEVICE_FACTOR_SHARE)
        self.M_t = self._tensor(ws.M)
        self.KR = KR
        self.factors: list[Any] = []
        Psi = torch.zeros((E, E), dtype=torch.float64, device=device)
        MT = self.M_t.T  # (d, E)
        if device is not None:  # the block solves' per-input scalings, sent once per Newton step
            self.QP_t, self.P_t = self._tensor(self.QP), self._tensor(self.P)
        for s in range(0, q, self.chunk):
            c = min(self.chunk, q - s)
            L = self._factor(delta[s : s + c])
            QP = (self._tensor(self.QP[s : s + c]) if device is None else self.QP_t[s : s + c])[:, None, :]  # (c, 1, E)
            if device is None:
                tic = time.perf_counter()
                Sinv = torch.cholesky_inverse(L)  # (c, d, d), symmetric
                self._tick("inverse", tic)
                tic = time.perf_counter()
                V = (Sinv.reshape(c * d, d) @ MT).view(c, d, E).mul_(QP)  # S_j^{-1} M' diag(QP_j), one GEMM
                Y = (MT[None] * QP).reshape(c * d, E)  # M' diag(QP_j), stacked
                Psi.addmm_(Y.T, V.view(c * d, E))
                self._tick("schur", tic)
                if self.keep:  # explicit inverses: the many later solves become batched mat-vecs
                    self.factors.append(Sinv)
                continue
            tic = time.perf_counter()
            eye = torch.eye(d, dtype=torch.float64, device=device).expand(c, d, d)
            Linv = torch.linalg.solve_triangular(L, eye, upper=False)  # (c, d, d): L_j^{-1}
            self._tick("inverse", tic)
            tic = time.perf_counter()
            Z = (Linv @ (MT[None] * QP)).reshape(c * d, E)  # L_j^{-1} M' diag(QP_j), stacked
            Psi.addmm_(Z.T, Z)  # sum_j Z_j' Z_j
            self._tick("schur", tic)
            if self.keep:
                self.factors.append(Linv)
        Psi = Psi.cpu().numpy()
        Psi[np.diag_indices(E)] += (1.0 / self.P).sum(axis=0)
        self.delta = None if self.keep else delta
        # the spread rows' system: Phi = D_s^{-1} + T Psi T', T = [I; I_two]
        two = np.flatnonzero(ws.two)
        self.two = two
        Ds = np.concatenate([D["up"], D["lo"]])
        T_idx = np.concatenate([np.arange(E), two])
        Phi = Psi[np.ix_(T_idx, T_idx)]
        Phi[np.diag_indices_from(Phi)] += 1.0 / Ds
        self.T_idx = T_idx
        sign = np.concatenate([np.ones(E), -np.ones(len(two))])
        self.Lg = np.hstack([ws.M[T_idx] * sign[:, None], ws.w[T_idx][:, None]])  # (m_s, d + 1)
        # one augmented system [[Phi, -Lg], [Lg', Reg_g]] [v; dg] = [rho; r_g], by LU with pivoting: no explicit
        # Phi^{-1} (Phi mixes tiny and huge entries near the optimum)
        m_s = len(T_idx)
        reg = np.full(d + 1, rho)
        reg[:d] += eps
        K = np.block([[Phi, -self.Lg], [self.Lg.T, np.diag(reg)]])
        from scipy.linalg import lu_factor, lu_solve

        self.lu, self.lu_solve, self.m_s = lu_factor(K, check_finite=False), lu_solve, m_s

    def _tensor(self, a: np.ndarray):
        """``a`` as a float64 tensor: a view on the CPU (default path), a copy on the backend's device."""
        if self.device is None:
            return self.torch.from_numpy(np.ascontiguousarray(a))
        return self.torch.as_tensor(np.ascontiguousarray(a), dtype=self.torch.float64, device=self.device)

    def _tick(self, name: str, tic: float) -> None:
        if self.device is not None and self.device.type == "cuda":  # kernels run asynchronously: wait for them
            self.torch.cuda.synchronize(self.device)
        self.timers[name] = self.timers.get(name, 0.0) + time.perf_counter() - tic

    def _factor(self, delta_chunk: np.ndarray):
        """Cholesky factors ``(c, d, d)`` of the blocks ``M' diag(delta_j) M + eps I`` of one chunk of inputs."""
        torch = self.torch
        tic = time.perf_counter()
        d = self.ws.sizes[0]
        delta_t = self._tensor(delta_chunk)
        if self.KR is not None:  # one GEMM on the packed outer products, then the lower triangles filled in
            packed = delta_t @ self.KR.values  # (c, d (d + 1) / 2)
            S = torch.zeros((len(delta_chunk), d, d), dtype=torch.float64, device=self.device)
            S[:, self.KR.rows, self.KR.cols] = packed
        else:
            X = self.M_t[None, :, :] * delta_t.sqrt()[:, :, None]  # (c, E, d)
            S = X.transpose(1, 2) @ X
        # eps, plus a relative floor so that the Cholesky exists when delta spans 1e-20..1e20 (the refinement
        # against the exact operator removes the difference)
        diag = S.diagonal(dim1=1, dim2=2)
        diag.add_(self.eps + 1e-13 * diag.amax(dim=1, keepdim=True))
        self._tick("blocks", tic)
        tic = time.perf_counter()
        L = torch.linalg.cholesky(S)  # reads the lower triangle only
        self._tick("cholesky", tic)
        return L

    def _block_solve(self, rW: np.ndarray, rU: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``K_j^{-1} (rW_j, rU_j)`` for all inputs: ``a = S_W^{-1} (rW - M' (Q/P) rU)``, ``b = (rU - Q M a) / P``."""
        torch = self.torch
        ws = self.ws
        rhs = rW - (self.QP * rU) @ ws.M  # (q, d)
        q = rhs.shape[0]
        a = np.empty_like(rhs)
        for i, s in enumerate(range(0, q, self.chunk)):
            block = torch.from_numpy(rhs[s : s + self.chunk])[:, :, None]
            if self.keep:
                a[s : s + self.chunk] = (self.factors[i] @ block).squeeze(2).numpy()
            else:
                L = self._factor(self.delta[s : s + self.chunk])
                a[s : s + self.chunk] = torch.cholesky_solve(block, L).squeeze(2).numpy()
        b = rU / self.P - self.QP * (a @ ws.M.T)
        return a, b

    def _block_solve_t(self, rW, rU):
        """:meth:`_block_solve` on the backend's device, for tensors there: ``S_j^{-1} r = L_j^{-T} (L_j^{-1} r)``
        with the kept ``L_j^{-1}`` (or a Cholesky solve on recomputed factors)."""
        torch = self.torch
        rhs = (rW - (self.QP_t * rU) @ self.M_t)[:, :, None]  # (q, d, 1)
        a = torch.empty_like(rhs)
        for i, s in enumerate(range(0, rhs.shape[0], self.chunk)):
            block = rhs[s : s + self.chunk]
            if self.keep:
                Linv = self.factors[i]
                a[s : s + self.chunk] = Linv.mT @ (Linv @ block)
            else:
                a[s : s + self.chunk] = torch.cholesky_solve(block, self._factor(self.delta[s : s + self.chunk]))
        a = a.squeeze(2)
        return a, rU / self.P_t - self.QP_t * (a @ self.M_t.T)

    def solve(self, r: _Point) -> _Point:
        """The preconditioner: this factorisation's solution of the regularised system for ``r`` (numpy)."""
        if self.device is not None:
            return self._from_device(self._solve_t(self._to_device(r)))
        d = self.ws.sizes[0]
        aW, bU = self._block_solve(r.W, r.U)
        rho = bU.sum(axis=0)[self.T_idx]
        sol = self.lu_solve(self.lu, np.concatenate([rho, r.W0, [r.t]]), check_finite=False)
        v, dg = sol[: self.m_s], sol[self.m_s :]
        tv = np.zeros(self.ws.sizes[2])
        np.add.at(tv, self.T_idx, v)
        aW2, bU2 = self._block_solve(np.zeros_like(r.W), np.broadcast_to(tv, r.U.shape))
        return _Point(dg[:d], float(dg[d]), aW - aW2, bU - bU2)

    def _solve_t(self, r: _Point) -> _Point:
        """:meth:`solve` for a point of tensors on the backend's device; only the spread rows' system (``m_s + d +
        1`` numbers each way) goes through the host's LU."""
        torch = self.torch
        d, _, E = self.ws.sizes
        if not hasattr(self, "T_idx_t"):
            self.T_idx_t = torch.as_tensor(self.T_idx, device=self.device)
        aW, bU = self._block_solve_t(r.W, r.U)
        rho = bU.sum(dim=0)[self.T_idx_t]
        host = torch.cat([rho, r.W0, rho.new_tensor([r.t])]).cpu().numpy()
        sol = self.lu_solve(self.lu, host, check_finite=False)
        v, dg = self._tensor(sol[: self.m_s]), sol[self.m_s :]
        tv = torch.zeros(E, dtype=torch.float64, device=self.device).index_add_(0, self.T_idx_t, v)
        aW2, bU2 = self._block_solve_t(torch.zeros_like(r.W), tv.expand(r.U.shape))
        return _Point(self._tensor(dg[:d]), float(dg[d]), aW - aW2, bU - bU2)

    def pcg(self, D: dict[str, np.ndarray], rhs: _Point, eps: float, rho: float, max_iter: int) -> tuple[_Point, float, int]:
        """:func:`_pcg` on the exact system ``(A' D A + eps I_W + rho I) dx = rhs`` preconditioned by this
        factorisation; with a device, every iteration runs there (``rhs`` sent, ``dx`` fetched once)."""
        if self.device is None:
            return _pcg(lambda v: _normal_apply(self.ws, D, eps, rho, v), self.solve, rhs, max_iter=max_iter)
        if getattr(self, "_ws_t", None) is None:
            ws = self.ws
            self._ws_t = _WorkingSet(self.M_t, *(self._tensor(a) for a in (ws.C, ws.R_up, ws.R_lo, ws.w)), self.torch.as_tensor(ws.two, device=self.device))
        cached = getattr(self, "_D_t", None)
        if cached is None or cached[0] is not D:  # the step's D_exact, then (rarely) D_reg
            self._D_t = (D, {k: self._tensor(v) for k, v in D.items()})
        ws_t, D_t = self._ws_t, self._D_t[1]
        x, rel, solves = _pcg(lambda v: _normal_apply(ws_t, D_t, eps, rho, v), self._solve_t, self._to_device(rhs), max_iter=max_iter)
        return self._from_device(x), rel, solves

    def _to_device(self, p: _Point) -> _Point:
        return _Point(self._tensor(p.W0), float(p.t), self._tensor(p.W), self._tensor(p.U))

    @staticmethod
    def _from_device(p: _Point) -> _Point:
        return _Point(p.W0.cpu().numpy(), float(p.t), p.W.cpu().numpy(), p.U.cpu().numpy())


def _pcg(apply, precondition, rhs: _Point, tol: float = 1e-12, max_iter: int = PCG_ITERATIONS) -> tuple[_Point, float, int]:
    """Conjugate gradients on ``apply(x) = rhs`` preconditioned by the block elimination (which is exact up to
    rounding, so this usually stops after 1-3 iterations; it keeps the step accurate where the elimination's
    rounding is not small near the optimum). Returns ``(x, relative residual, preconditioner solves)``."""
    x = precondition(rhs)
    r = rhs.axpy(-1.0, apply(x))
    norm_rhs = np.sqrt(_dot(rhs, rhs)) or 1.0
    z = precondition(r)
    p = z
    rz = _dot(r, z)
    rel = np.sqrt(_dot(r, r)) / norm_rhs
    solves = 2
    for _ in range(max_iter):
        if rel <= tol or rz <= 0:
            break
        Ap = apply(p)
        pAp = _dot(p, Ap)
        if pAp <= 0:
            break
        alpha = rz / pAp
        x = x.axpy(alpha, p)
        r = r.axpy(-alpha, Ap)
        rel = np.sqrt(_dot(r, r)) / norm_rhs
        z = precondition(r)
        solves += 1
        rz_new = _dot(r, z)
        p = z.axpy(rz_new / rz, p)
        rz = rz_new
    return x, float(rel), solves


def _normal_apply(ws: _WorkingSet, D: dict[str, np.ndarray], eps: float, rho: float, dx: _Point) -> _Point:
    """``(A' D A + eps I_W + rho I) dx``, matrix-free."""
    Adx = _A(ws, dx)
    out = _AT(ws, {k: D[k] * Adx[k] for k in D})
    return _Point(out.W0 + (eps + rho) * dx.W0, out.t + rho * dx.t, out.W + (eps + rho) * dx.W, out.U + rho * dx.U)


def _dot(x: _Point, y: _Point) -> float:
    return float(x.W0 @ y.W0 + x.t * y.t + (x.W * y.W).sum() + (x.U * y.U).sum())  # numpy arrays or tensors


def _norm_inf(x) -> float:
    if isinstance(x, _Point):
        return max(np.abs(x.W0).max(initial=0), abs(x.t), np.abs(x.W).max(initial=0), np.abs(x.U).max(initial=0))
    return max(np.abs(v).max(initial=0) for v in x.values())


def solve_working_set(
    ws: _WorkingSet,
    eps: float = REGULARIZATION,
    threads: int = 1,
    tol: float = IPM_TOL,
    probe: Any = None,
    device: Any = None,
) -> tuple[_Point, float, dict[str, Any]]:
    """``max t`` on the working set by Mehrotra's predictor-corrector; returns ``(x, t, info)``.

    ``min -t + (eps/2) ||(W0, W)||^2`` s.t. ``A x + s = b``, ``s >= 0``; raises ``RuntimeError`` when it does
    not converge (an unbounded margin included: ``t`` then grows without limit).

    ``probe(x, t) -> bool``, called at each iterate once the gap is below ``PROBE_GAP``: True stops the solve
    there (``info["probed"]``), for row generation to add the rows that iterate violates or to return a rule
    certified optimal. ``device``: where the Newton step's heavy kernels run (:class:`_NormalSolver`)."""
    d, q, E = ws.sizes
    scale = max(1.0, np.abs(ws.C).max(initial=0), np.abs(ws.R_up).max(initial=0))
    eps = eps * scale
    rho, delta = PRIMAL_REGULARIZATION * scale, DUAL_REGULARIZATION / scale
    # the absolute values start min(1, START_SPREAD / q) above |C|: a row's spread (their sum over the q inputs)
    # then starts O(START_SPREAD), not O(q)
    x = _Point(np.zeros(d), 0.0, np.zeros((q, d)), np.abs(ws.C.T) + min(1.0, START_SPREAD / max(1, q)))
    s0 = _slacks(ws, x)
    x.t = float(min(np.min((s0["up"]) / ws.w), np.min(s0["lo"] / ws.w[ws.two]) if ws.two.any() else np.inf)) - 1.0
    s = _slacks(ws, x)
    y = {k: np.ones_like(v) for k, v in s.items()}
    b_norm = 1.0 + max(np.abs(ws.C).max(initial=0), np.abs(ws.R_up).max(initial=0), np.abs(ws.R_lo[ws.two]).max(initial=0))
    n_rows = sum(v.size for v in s.values())
    info: dict[str, Any] = {"eps": eps}
    timers: dict[str, float] = {}
    info["timers_s"] = timers
    KR = packed_outer_products(ws.M, device_budget(device, PACKED_BYTES, DEVICE_PACKED_SHARE), device)
    best = None
    for it in range(1, MAX_IPM_ITERATIONS + 1):
        ATy = _AT(ws, y)
        # dual residual r_d = -(c + eps x_W + A'y), c = -1 on t
        rd = _Point(-(ATy.W0 + eps * x.W0), -(ATy.t - 1.0), -(ATy.W + eps * x.W), -ATy.U)
        Ax = _A(ws, x)
        b = _b(ws)
        rp = {k: b[k] - Ax[k] - s[k] for k in s}
        mu = sum(float(np.sum(s[k] * y[k])) for k in s) / n_rows
        pres = _norm_inf(rp) / b_norm
        dres = _norm_inf(rd) / (1.0 + _norm_inf(ATy))
        gap = mu * n_rows / (1.0 + abs(x.t) * float(np.max(ws.w)))
        log.debug("ipm %d: t=%.10g pres=%.2e dres=%.2e gap=%.2e solve=%.1e", it, x.t, pres, dres, gap, info.get("solve_residual", 0.0))
        report(f"interior point iteration {it}: t={x.t:.8g}, gap {gap:.2e}, residuals {pres:.1e}/{dres:.1e}")
        if pres < tol and dres < DUAL_TOL and gap < tol:
            info.update(ipm_iterations=it, pres=pres, dres=dres, gap=gap)
            return x, x.t, info
        if probe is not None and gap < PROBE_GAP and pres < 1e-6 and probe(x, x.t):
            info.update(ipm_iterations=it, pres=pres, dres=dres, gap=gap, probed=True)
            return x, x.t, info
        if pres < 1e-8 and dres < DUAL_TOL and (best is None or gap < best[3]):
            best = (x, pres, dres, gap)
        if best is not None and (dres > 1e3 * max(best[2], 1e-12) or info.get("solve_residual", 0.0) > 1e-4):
            if best[3] < STALL_GAP:  # numerical stall: the best point is optimal to best[3]
                info.update(ipm_iterations=it, pres=best[1], dres=best[2], gap=best[3], stalled=True)
                return best[0], best[0].t, info
            raise RuntimeError(f"structured interior point lost accuracy at gap {best[3]:.2e} (iteration {it})")
        if not np.isfinite(x.t) or abs(x.t) > 1e12 * b_norm:
            raise RuntimeError(f"structured interior point diverged (t = {x.t:.3g}): is the margin unbounded on this working set?")
        # The factorisation uses the regularised scaling D = y / (s + delta y) (bounded, so the elimination stays
        # accurate); conjugate gradients preconditioned by it then solve the exact system (delta = 0), which keeps
        # the fast final convergence; where they cannot (near the end, on degenerate rows), the regularised system.
        D_reg = {k: y[k] / (s[k] + delta * y[k]) for k in s}
        D_exact = {k: y[k] / s[k] for k in s}
        info["solve_residual"] = 0.0
        tic = time.perf_counter()
        ns = _NormalSolver(ws, D_reg, eps, rho, KR, timers, device)
        timers["factor"] = timers.get("factor", 0.0) + time.perf_counter() - tic
        tic = time.perf_counter()

        def direction(rc, ns=ns, D_reg=D_reg, D_exact=D_exact, s=s, y=y, rp=rp, rd=rd):
            scratch: dict[str, Any] = {}
            out = _direction(ws, ns, D_exact, s, y, rp, rd, rc, eps, rho, scratch, EXACT_PCG_ITERATIONS)
            info["block_solves"] = info.get("block_solves", 0) + scratch["block_solves"]
            if scratch["solve_residual"] <= 1e-9:
                return out
            info["regularised_steps"] = info.get("regularised_steps", 0) + 1
            return _direction(ws, ns, D_reg, s, y, rp, rd, rc, eps, rho, info)

        dx, ds, dy = direction({k: -s[k] * y[k] for k in s})
        ap, ad = _step(s, ds), _step(y, dy)
        mu_aff = sum(float(np.sum((s[k] + ap * ds[k]) * (y[k] + ad * dy[k]))) for k in s) / n_rows
        sigma = (mu_aff / mu) ** 3
        dx, ds, dy = direction({k: sigma * mu - s[k] * y[k] - ds[k] * dy[k] for k in s})
        ap, ad = 0.99 * _step(s, ds), 0.99 * _step(y, dy)
        ap, ad = min(1.0, ap), min(1.0, ad)
        timers["directions"] = timers.get("directions", 0.0) + time.perf_counter() - tic
        x = x.axpy(ap, dx)
        s = {k: s[k] + ap * ds[k] for k in s}
        y = {k: y[k] + ad * dy[k] for k in s}
    raise RuntimeError(f"structured interior point did not converge in {MAX_IPM_ITERATIONS} iterations")


def _direction(ws, ns, D, s, y, rp, rd, rc, eps, rho, info, max_iter: int = PCG_ITERATIONS):
    """One regularised Newton direction: ``(eps + rho + A'DA) dx = rd - A' D (rc / y - rp)``,
    ``dy = D (A dx + rc / y - rp)``, ``ds = (rc - s dy) / y``."""
    corr = {k: D[k] * (rc[k] / y[k] - rp[k]) for k in s}
    rhs = rd.axpy(-1.0, _AT(ws, corr))
    dx, rel, solves = ns.pcg(D, rhs, eps, rho, max_iter)
    info["solve_residual"] = max(info.get("solve_residual", 0.0), rel)
    info["block_solves"] = info.get("block_solves", 0) + solves
    Adx = _A(ws, dx)
    dy = {k: D[k] * (Adx[k] + rc[k] / y[k] - rp[k]) for k in s}
    ds = {k: (rc[k] - s[k] * dy[k]) / y[k] for k in s}
    return dx, ds, dy


def _b(ws: _WorkingSet) -> dict[str, np.ndarray]:
    q = ws.C.shape[1]
    return {"a": -ws.C.T, "b": ws.C.T.copy(), "up": ws.R_up, "lo": ws.R_lo[ws.two]} if q else {"a": np.zeros((0, len(ws.w))), "b": np.zeros((0, len(ws.w))), "up": ws.R_up, "lo": ws.R_lo[ws.two]}


def _step(v: dict[str, np.ndarray], dv: dict[str, np.ndarray]) -> float:
    """The largest ``alpha`` in (0, 1/0.99] keeping ``v + alpha dv >= 0``."""
    alpha = 1.0 / 0.99
    for k in v:
        neg = dv[k] < 0
        if np.any(neg):
            alpha = min(alpha, float(np.min(-v[k][neg] / dv[k][neg])))
    return alpha
