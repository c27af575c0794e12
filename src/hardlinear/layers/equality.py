"""Orthogonal projection of a network output onto the equality constraints ``{y : G(x) y = g(x)}``.

The paper's appendix ("Handling equality constraints"): ``y - Gbar (G y - g)`` with ``Gbar = G' (G G')^-1``.

* Constant ``G`` (DC-OPF, and any family whose ``G_stack`` has no input-dependent slice): ``G`` is factorised
  once, in float64, by a full SVD ``G = U S V'``. Rows that are linear combinations of others are harmless:
  only the ``r`` singular values above ``rank_tol`` count, ``Gbar`` is the pseudo-inverse, and the map is

      y -> N N' y + P x          (N: (n, n - r), an orthonormal basis of the null space), or
      y -> y - R R' y + P x      (R: (n, r), an orthonormal basis of the row space),

  with ``P = G^+ B_eq: (n, k + 1)`` applied to ``x = (1, xi)``. Both are exact; the cheaper one is the one
  whose basis is thinner (``min(r, n - r)`` columns): in the paper's standard form the null space is tiny
  (18 columns at 118 buses against 1108 rows), so one thin matmul replaces a dense ``n x n`` projector.
* ``G(x) = sum_j x_j G_j`` (the portfolio in standard form): per instance ``lambda = (G G')^-1 (G y - g)``
  by a batched Cholesky solve, ``y - G' lambda``, with an optional refinement step; instances whose ``G G'``
  is singular (dependent rows at that ``x``) fall back to the pseudo-inverse.

* Constant sparse ``G`` at large ``n`` (more than ``SPARSE_MIN_N`` columns, e.g. DC-OPF above ~500 buses in the
  standard form): the SVD's ``n x n`` factor would not fit (3 GB at 2,000 buses, 120 GB at 13,659), so the same
  null form is built from one sparse LU of ``G G'`` (:mod:`hardlinear.rules.sparse_elimination`): ``N`` from
  projected random vectors, ``P = G' (G G')^{-1} B_eq``. ``N N'`` and ``P`` are the same matrices as the SVD's (the
  projector onto ``null(G)`` and the min-norm solution are unique), so outputs agree to rounding
  (tests/test_sparse_projector.py); memory is ``O(nnz(LU) + n (d + k))``. Dependent rows make ``G G'`` singular:
  then the SVD is used, with a warning of its memory. Where a gradient is needed (training) on CPU in float64,
  this factorisation projects by a sparse Cholesky of ``G G'`` instead of the basis
  (:mod:`hardlinear.layers.normal_projection`: ~2.6x faster at case6470_rte, the same map to rounding);
  ``train_solve="basis"`` turns that off.

Everything runs in the input's dtype; the float64 constants are cached per (device, dtype).
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from hardlinear.constraints.family import ConstraintFamily, InputDependentFamily, JointlyLinearFamily, lift
from hardlinear.layers.normal_projection import NormalProjection, cholesky_available

PROJECTOR_FORMS = ("auto", "null", "row")
FACTORISATIONS = ("auto", "svd", "sparse")
TRAIN_SOLVES = ("auto", "basis")
# factorisation="auto" uses the sparse LU above this many columns (and the exact dense SVD at or below it, so the
# paper's cases, n <= 1,527, and case500_goc's 4,497 keep the factorisation their recorded results were made with).
SPARSE_MIN_N = 5000
ROW_FORM_MAX_ROWS = 256  # up to this many equality rows (and at most half the columns) a constant G keeps the row form


class Float64Constants(nn.Module):
    """Buffers that follow ``module.to(device)`` but keep float64 under ``module.to(dtype)``.

    Why: ``layer.float()`` would otherwise round the factorisation once and for all, and float64 inputs would
    silently lose the exactness they pay for. Casts to the input's dtype happen per call (and are cached).
    """

    def __init__(self, **arrays: np.ndarray) -> None:
        super().__init__()
        self._casts: dict = {}
        for name, arr in arrays.items():
            self.register_buffer(
                name, torch.as_tensor(np.ascontiguousarray(arr), dtype=torch.float64), persistent=False
            )

    def _apply(self, fn, recurse: bool = True):  # noqa: ANN001 - torch's own signature
        self._casts.clear()
        for name, buf in self._buffers.items():
            if buf is not None:
                device = fn(torch.empty(0, dtype=buf.dtype, device=buf.device)).device
                self._buffers[name] = buf.to(device)
        return self

    def get(self, names: tuple[str, ...], like: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The named buffers in ``like``'s dtype and on its device."""
        key = (names, like.device, like.dtype)
        out = self._casts.get(key)
        if out is None:
            out = tuple(self._buffers[n].to(device=like.device, dtype=like.dtype) for n in names)
            self._casts[key] = out
        return out


def constant_lhs(family: ConstraintFamily, which: str, sparse: bool = False) -> np.ndarray | sp.csr_matrix | None:
    """The constant ``G`` (``which="G"``) or ``H`` of a family as a dense float64 array (a CSR matrix with
    ``sparse=True``: large grids, where the dense one alone is gigabytes), or None if it varies.

    An :class:`InputDependentFamily` whose slices ``j >= 1`` are all zero is constant too (e.g. the
    portfolio's ``G`` in the compact form, its ``H = [0, -I]`` in the standard form).
    """
    if isinstance(family, JointlyLinearFamily):
        M = getattr(family, which)
        return sp.csr_matrix(M, dtype=np.float64) if sparse else M.toarray()
    if isinstance(family, InputDependentFamily):
        stack = getattr(family, f"{which}_stack")
        if np.any(stack[1:]):
            return None
        return sp.csr_matrix(stack[0], dtype=np.float64) if sparse else stack[0].copy()
    raise TypeError(f"unsupported constraint family {type(family).__name__}")


class EqualityProjector(nn.Module):
    """``forward(xi: (B, k), y: (B, n)) -> (B, n)``: the orthogonal projection onto ``{y : G(x) y = g(x)}``.

    Args:
        family: the constraint family (its equality rows are used).
        form: ``"null"``, ``"row"`` or ``"auto"`` (thinner basis) for a constant ``G``; ignored otherwise.
        factorisation: ``"svd"`` (dense, rank-revealing), ``"sparse"`` (LU of ``G G'``, null form only, full row
            rank only) or ``"auto"``: sparse above ``SPARSE_MIN_N`` columns when ``form`` is not ``"row"``.
        rank_tol: singular values at or below it are dependent rows (default ``max(m, n) * eps * s_max``).
        refine: extra refinement steps of the per-instance solve (input-dependent ``G``); one step brings
            the float64 residual from ``cond(G G') * eps`` down to about ``cond(G) * eps``.
        train_solve: ``"auto"``: with the sparse factorisation, a float64 CPU input that needs a gradient is projected
            by a sparse Cholesky of ``G G'`` (:mod:`hardlinear.layers.normal_projection`); ``"basis"``: always by
            the orthonormal basis.
    """

    def __init__(
        self, family: ConstraintFamily, form: str = "auto", rank_tol: float | None = None, refine: int = 1,
        factorisation: str = "auto", train_solve: str = "auto",
    ) -> None:
        super().__init__()
        if train_solve not in TRAIN_SOLVES:
            raise ValueError(f"train_solve must be one of {TRAIN_SOLVES}; got {train_solve!r}")
        if form not in PROJECTOR_FORMS:
            raise ValueError(f"form must be one of {PROJECTOR_FORMS}; got {form!r}")
        if factorisation not in FACTORISATIONS:
            raise ValueError(f"factorisation must be one of {FACTORISATIONS}; got {factorisation!r}")
        if factorisation == "sparse" and form == "row":
            raise ValueError("factorisation='sparse' builds the null form; use form='null' or 'auto', or factorisation='svd'")
        if rank_tol is not None and rank_tol < 0:
            raise ValueError(f"rank_tol must be >= 0 (or None for the default); got {rank_tol}")
        if refine < 0:
            raise ValueError(f"refine must be >= 0; got {refine}")
        self.n, self.m_eq, self.k = family.n, family.m_eq, family.k
        self.refine = int(refine)
        self.factorisation = "svd"
        self.normal_projection = None  # NormalProjection: set by the sparse factorisation (train_solve="auto")
        G = constant_lhs(family, "G", sparse=True) if family.m_eq else sp.csr_matrix((0, family.n))
        self.input_dependent = G is None
        if self.input_dependent:
            assert isinstance(family, InputDependentFamily)
            self.form, self.rank = "batched", family.m_eq
            self.consts = Float64Constants(G_flat=family.G_stack.reshape(family.k + 1, -1), B_eq_T=family.B_eq.T)
            return
        B_eq = np.asarray(family.B_eq, dtype=np.float64)
        # a few rows in many columns (the dispatch's balance in the inequality form: 1 x 17,494 at case9241): the row
        # form's basis has one column per row and a thin SVD finds it in O(m^2 n), where the null form's basis would be
        # n x (n - m) (2.4 GB and a 20-minute QR there)
        rows_thin = form == "auto" and G.shape[0] <= ROW_FORM_MAX_ROWS and 2 * G.shape[0] < family.n
        sparse = factorisation == "sparse" or (factorisation == "auto" and form != "row" and family.n > SPARSE_MIN_N and not rows_thin)
        if sparse and family.m_eq and rank_tol is None and self._factorise_sparse(G, B_eq):
            if train_solve == "auto" and cholesky_available():
                self.normal_projection = NormalProjection(G)
            return
        if sparse and family.m_eq:
            warnings.warn(
                f"equality projector: the sparse factorisation does not apply (dependent or ill-conditioned rows, "
                f"or rank_tol given); the dense SVD of G ({G.shape[0]} x {G.shape[1]}) needs about "
                f"{8 * (G.shape[0] ** 2 + G.shape[1] ** 2) / 1e9:.1f} GB",
                stacklevel=2,
            )
        self._factorise(G.toarray(), B_eq, form, rank_tol)

    # --- constant sparse G at large n: one sparse LU of G G' ---------------------------------------------
    def _factorise_sparse(self, G: sp.csr_matrix, B_eq: np.ndarray) -> bool:
        """The null form from :func:`~hardlinear.rules.sparse_elimination.eliminate`; False where it does not
        apply (the caller then uses the SVD)."""
        from hardlinear.rules.sparse_elimination import PARTICULAR_TOL, eliminate

        elim = eliminate(G)
        if elim is None:
            return False
        P = elim.min_norm(B_eq)  # (n, k + 1): G^+ B_eq
        if not elim.residual(P, B_eq) <= PARTICULAR_TOL:
            return False
        self.rank, self.form, self.factorisation = G.shape[0], "null", "sparse"
        # P x from the inputs that move it only (DC-OPF with inputs=all_buses: half the buses carry no load), and
        # outside the graph: at 2,000 buses the dense [y N, x] @ W of the SVD path costs 3x the flops of this.
        active = np.flatnonzero(np.any(P[:, 1:] != 0, axis=0))
        self.register_buffer("active", torch.as_tensor(active, dtype=torch.long), persistent=False)
        self.consts = Float64Constants(basis=elim.N, p0=P[:, 0], P_T=np.ascontiguousarray(P[:, 1 + active].T))
        return True

    def particular(self, xi: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        """``(B, k) -> P x: (B, n)`` in ``like``'s dtype: the min-norm point of ``{y : G y = B_eq x}`` (constant G)."""
        xi = xi.to(like.dtype)
        if self.factorisation == "sparse":
            p0, P_T = self.consts.get(("p0", "P_T"), like)
            if P_T.shape[0] == 0:
                return p0.expand(xi.shape[0], -1)
            return torch.addmm(p0, xi.index_select(1, self.active), P_T)
        basis, W = self.consts.get(("basis", "W"), like)
        return lift(xi) @ W[basis.shape[1] :]

    def particular_matrix(self) -> np.ndarray:
        """``P = G^+ B_eq: (n, k + 1)`` in float64 (constant ``G``)."""
        if self.factorisation == "sparse":
            P = np.zeros((self.n, self.k + 1))
            P[:, 0] = self.consts._buffers["p0"].cpu().numpy()
            P[:, 1 + self.active.cpu().numpy()] = self.consts._buffers["P_T"].cpu().numpy().T
            return P
        b = self.consts._buffers["basis"].shape[1]
        return self.consts._buffers["W"].detach().cpu().double().numpy()[b:].T.copy()

    # --- constant G: one SVD -------------------------------------------------------------------------
    def _factorise(self, G: np.ndarray, B_eq: np.ndarray, form: str, rank_tol: float | None) -> None:
        m, n = G.shape
        if m:
            # the row form needs the row space's basis only: a thin SVD (the full one is n x n)
            thin = form == "row" or (form == "auto" and 2 * m < n)  # then r <= m < n - r: the row form
            U, s, Vt = np.linalg.svd(G, full_matrices=not thin)
            tol = rank_tol if rank_tol is not None else max(m, n) * np.finfo(np.float64).eps * s[0]
            r = int(np.sum(s > tol))
        else:
            U, s, Vt, r = np.zeros((0, 0)), np.zeros(0), np.eye(n), 0
        Ur, Vr = U[:, :r], Vt[:r].T
        coef = Ur.T @ B_eq  # (r, k + 1)
        P = Vr @ (coef / s[:r, None])  # G^+ B_eq: (n, k + 1)
        if m > r:
            # Dependent rows must have dependent right-hand sides, else no y satisfies them all.
            miss = np.linalg.norm(B_eq - Ur @ coef) / (1.0 + np.linalg.norm(B_eq))
            if miss > 1e-9:
                warnings.warn(
                    f"equality rows are dependent ({m - r} of {m}) but their right-hand sides are not "
                    f"(relative mismatch {miss:.1e}): projecting onto the least-squares solutions",
                    stacklevel=3,
                )
        self.rank = r
        null_dim = n - r
        if form == "auto":
            form = "null" if null_dim <= r else "row"
        self.form = form
        basis = Vt[r:].T if form == "null" else Vr  # (n, b)
        sign = 1.0 if form == "null" else -1.0
        # out = base + [y @ basis, x] @ W, with base = 0 (null form) or y (row form) and x = (1, xi): one
        # matmul writes the output (an addmm with a broadcast p0 would first copy p0 into every row).
        W = np.vstack([sign * basis.T, P.T])  # (b + k + 1, n)
        self.consts = Float64Constants(basis=basis, W=W)

    def extra_repr(self) -> str:
        return f"n={self.n}, m_eq={self.m_eq}, rank={self.rank}, form={self.form}, factorisation={self.factorisation}"

    def affine_parametrisation(self, xi: torch.Tensor, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(N, c)`` with ``{y : G(x) y = g(x)} = {N u + c : u}``, ``N`` orthonormal and ``N' c = 0``, in
        ``like``'s dtype: ``N: (n, b)`` for a constant ``G`` held in the null form, ``N: (B, n, b)`` per instance
        for ``G(x)`` (one batched SVD); ``c: (B, n)``. None when there is no such form here: no equalities, a
        constant ``G`` in the row form, or an instance whose ``G(x)`` loses rank.

        Why: iterative corrections that stay in the affine set (APM, EAPM) can then iterate on the ``b``
        coordinates ``u`` instead of on ``n``-vectors, factorising once per call instead of once per step,
        and never leave the set by rounding.
        """
        if self.m_eq == 0:
            return None
        xi = xi.to(like.dtype)
        if not self.input_dependent:
            if self.form != "null":
                return None
            (basis,) = self.consts.get(("basis",), like)
            return basis, self.particular(xi, like)
        G, g = self.lhs(xi, like)
        U, s, Vh = torch.linalg.svd(G, full_matrices=True)
        tol = max(self.m_eq, self.n) * torch.finfo(like.dtype).eps * s[:, :1]
        if not bool(torch.isfinite(s).all()) or bool((s <= tol).any()):
            return None  # a dependent row at some input: the generic path's pseudo-inverse handles it
        r = self.m_eq
        V = Vh.transpose(1, 2)
        c = (V[:, :, :r] @ ((U.transpose(1, 2) @ g.unsqueeze(2)) / s.unsqueeze(2))).squeeze(2)
        return V[:, :, r:], c

    def forward(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k), y: (B, n) -> (B, n)``, in ``y``'s dtype."""
        if self.m_eq == 0:
            return y
        xi = xi.to(y.dtype)
        if self.input_dependent:
            return self._batched(xi, y)
        if self.factorisation == "sparse":  # N (N' y) + P x, the gradient through the first term only
            if self._trains_by_cholesky(y):
                return self.normal_projection(y) + self.particular(xi, y)
            (basis,) = self.consts.get(("basis",), y)
            return torch.addmm(self.particular(xi, y), y @ basis, basis.T)
        basis, W = self.consts.get(("basis", "W"), y)
        z = torch.cat([y @ basis, y.new_ones(y.shape[0], 1), xi], dim=1)
        out = z @ W
        return out if self.form == "null" else out + y

    def _trains_by_cholesky(self, y: torch.Tensor) -> bool:
        """Whether ``y`` is projected by :class:`NormalProjection`: it needs a gradient, on CPU, in float64."""
        return (
            self.normal_projection is not None and y.requires_grad and torch.is_grad_enabled()
            and y.device.type == "cpu" and y.dtype == torch.float64
        )

    # --- input-dependent G: batched solves ---------------------------------------------------------
    def lhs(self, xi: torch.Tensor, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``xi: (B, k) -> (G(x): (B, m_eq, n), g(x): (B, m_eq))`` in ``like``'s dtype."""
        G_flat, B_eq_T = self.consts.get(("G_flat", "B_eq_T"), like)
        x = lift(xi)
        return (x @ G_flat).view(-1, self.m_eq, self.n), x @ B_eq_T

    def _batched(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        G, g = self.lhs(xi, y)
        Gt = G.transpose(1, 2)
        M = G @ Gt
        L, info = torch.linalg.cholesky_ex(M)
        singular = info != 0
        pinv = None
        if torch.compiler.is_exporting() or bool(singular.any()):  # an exported program holds both (same rows)
            # Dependent rows at these inputs: the pseudo-inverse gives the least-norm correction. Inputs that
            # are not finite (NaN xi) make M non-finite: give them the identity and let the NaN pass through.
            eye = torch.eye(self.m_eq, dtype=M.dtype, device=M.device)
            finite = torch.isfinite(M).all(dim=2).all(dim=1)
            pinv = torch.linalg.pinv(torch.where(finite[:, None, None], M, eye))
            L = torch.where(singular[:, None, None], eye, L)
        for _ in range(1 + self.refine):
            r = (G @ y.unsqueeze(2)) - g.unsqueeze(2)
            lam = torch.cholesky_solve(r, L)
            if pinv is not None:
                lam = torch.where(singular[:, None, None], pinv @ r, lam)
            y = y - (Gt @ lam).squeeze(2)
        return y
