"""Douglas-Rachford projection onto ``{y : G y = g, l <= H y <= u, lo <= y <= hi}`` with constant ``G, H``.

Pinet's correction (Grontas, Terpin et al., "Pinet: optimizing hard-constrained neural networks with orthogonal
projection layers"), written here from its math. The projection of ``y_raw``,

    min_y ||y - y_raw||^2   s.t.  G y = g,  l <= H y <= u,  lo <= y <= hi   (box optional, per coordinate),

is lifted with a slack ``s = H y`` for the inequality rows: ``z = (y, s)`` in ``R^{n + m}``, one affine set
``A z = b`` with ``A = [[G, 0], [H, -I]]``, ``b = (g, 0)``, and one box on ``z`` (``l <= s <= u``, plus the box on
``y`` where one is given). Optionally ``A`` is equilibrated (Ruiz): ``A~ = diag(d_r) A diag(d_c)``, ``z = d_c z~``,
``b~ = d_r b``, the box divided by ``d_c``. With ``d = d_c[:n]``, step ``sigma`` and relaxation ``omega``, one
iteration from the governing sequence ``s_k`` (``s_0 = 0``) is

    z_k     = P_eq(s_k)                                  (projection onto A~ z = b~, by A~'s pseudo-inverse)
    r_k     = 2 z_k - s_k
    t_k     = clip((2 sigma d y_raw + r_k[y]) / (1 + 2 sigma d^2),  r_k[s])   (the objective's prox; the box)
    s_{k+1} = s_k + omega (t_k - z_k)

and the output is ``y = d * P_eq(s_K)[:n]``: the equalities hold to rounding whatever ``K`` is; the inequalities
and the box only to the distance DR has left after ``K`` iterations (the caller measures and reports it).

Gradients (``backward``):

* ``"implicit"`` (Pinet's default): ``s_K`` is taken as the fixed point of ``T(s, y_raw)``; the cotangent ``v`` of
  ``P_eq`` is pushed through ``(I - J_{T,s}')^{-1}`` by BiCGSTAB (``n_iter_bwd`` iterations at most, stopping at
  relative residual ``bwd_tol``; the whole batch is one linear system, as JAX's solver treats a batched array),
  then through ``J_{T,y_raw}'``. ``g, h`` get no gradient (they are data).
* ``"fixed_point"``: the same system by ``n_iter_bwd`` fixed-point steps ``w <- J_{T,s}' w + v`` from ``w = 0``.
* ``"unrolled"``: autograd through the ``K`` iterations (every input gets its gradient, memory grows with ``K``).

The ``K`` iterations run as :mod:`hardlinear.layers.dr_loop`'s fused loop (one product with ``P`` and five
elementwise passes an iteration, a CUDA graph on a GPU); :meth:`DouglasRachfordProjection._step` is the reference
iteration, kept for the implicit backward's Jacobian products and for the tests that hold the loop to it.

Public entry points: :class:`DouglasRachfordProjection` (a module holding the factorised constants) and
:func:`ruiz_equilibration`. Everything runs in float64 unless the input is float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from hardlinear.layers.dr_loop import AffineProjection, ProxData, iterate, projector_factor
from hardlinear.layers.equality import Float64Constants

BACKWARDS = ("implicit", "fixed_point", "unrolled")
RUIZ_MODES = ("gauss", "jacobi")


@dataclass(frozen=True)
class RuizSettings:
    """Ruiz equilibration of the lifted matrix (Pinet's ``EquilibrationParams``; ``max_iter=0`` turns it off).

    ``tol``: stop once ``max(1 - min/max row norm, 1 - min/max column norm) < tol``; ``ord``: the norm of rows and
    columns; ``col_scaling``: scale the column factors by ``(rows / cols)^(1 / (2 ord))``; ``mode``: ``gauss``
    (rows, then columns of the row-scaled matrix) or ``jacobi`` (both from the same matrix); ``safeguard``: drop
    the scaling when it makes the condition number worse.
    """

    max_iter: int = 0
    tol: float = 1e-3
    ord: float = 2.0
    col_scaling: bool = False
    mode: str = "gauss"
    safeguard: bool = False

    def __post_init__(self) -> None:
        if self.max_iter < 0 or self.tol < 0:
            raise ValueError(f"Ruiz needs max_iter >= 0 and tol >= 0; got {self.max_iter}, {self.tol}")
        if self.mode not in RUIZ_MODES:
            raise ValueError(f"Ruiz mode must be one of {RUIZ_MODES}; got {self.mode!r}")


def ruiz_equilibration(M: np.ndarray, settings: RuizSettings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``M: (r, c) -> (diag(d_r) M diag(d_c), d_r, d_c)``: the best-balanced scaling met in ``max_iter`` rounds."""
    rows, cols = M.shape
    d_r, d_c = np.ones(rows), np.ones(cols)
    best = (np.inf, d_r, d_c)
    S = M.copy()
    alpha = (rows / cols) ** (1.0 / (2.0 * settings.ord)) if settings.col_scaling else 1.0

    def factor(norms: np.ndarray) -> np.ndarray:
        f = np.sqrt(norms)
        return np.where(f == 0, 1.0, f)

    for _ in range(settings.max_iter):
        if settings.mode == "gauss":
            r = factor(np.linalg.norm(S, ord=settings.ord, axis=1))
            d_r, S = d_r / r, S / r[:, None]
            c = alpha * factor(np.linalg.norm(S, ord=settings.ord, axis=0))
            d_c, S = d_c / c, S / c[None, :]
        else:
            r = factor(np.linalg.norm(S, ord=settings.ord, axis=1))
            c = alpha * factor(np.linalg.norm(S, ord=settings.ord, axis=0))
            d_r, d_c = d_r / r, d_c / c
            S = S / r[:, None] / c[None, :]
        rn = np.linalg.norm(S, ord=settings.ord, axis=1)
        cn = np.linalg.norm(S, ord=settings.ord, axis=0)
        crit = max(1 - rn.min() / rn.max(), 1 - cn.min() / cn.max())
        if crit < best[0]:
            best = (crit, d_r.copy(), d_c.copy())
        if crit < settings.tol:
            break
    _, d_r, d_c = best
    scaled = M * d_r[:, None] * d_c[None, :]
    if settings.safeguard and np.linalg.cond(scaled) > np.linalg.cond(M):
        return M.copy(), np.ones(rows), np.ones(cols)
    return scaled, d_r, d_c


def _bicgstab(apply_A, b: torch.Tensor, maxiter: int, tol: float) -> torch.Tensor:
    """Unpreconditioned BiCGSTAB for ``A w = b`` from ``w = 0``; inner products over the whole tensor."""
    w = torch.zeros_like(b)
    r = b.clone()
    r_hat = b.clone()
    rho = alpha = omega = torch.ones((), dtype=b.dtype, device=b.device)
    v = p = torch.zeros_like(b)
    bound = tol * torch.linalg.vector_norm(b)
    for _ in range(maxiter):
        if torch.linalg.vector_norm(r) <= bound:
            break
        rho_new = (r_hat * r).sum()
        if rho_new == 0 or omega == 0:
            break  # breakdown: keep the iterate so far
        beta = (rho_new / rho) * (alpha / omega)
        p = r + beta * (p - omega * v)
        v = apply_A(p)
        denom = (r_hat * v).sum()
        if denom == 0 or not torch.isfinite(denom):
            break  # breakdown (r_hat orthogonal to A p): a division would turn the iterate into NaN
        alpha = rho_new / denom
        h = w + alpha * p
        s = r - alpha * v
        if torch.linalg.vector_norm(s) <= bound:
            w = h
            break
        t = apply_A(s)
        tt = (t * t).sum()
        omega = (t * s).sum() / tt if tt > 0 else torch.zeros_like(tt)
        w = h + omega * s
        r = s - omega * t
        rho = rho_new
    return w


class DouglasRachfordProjection(nn.Module):
    """``forward(y_raw: (B, n), g: (B, m_eq), u: (B, m), l=None, n_iter=50) -> (y: (B, n), s_K: (B, n + m))``.

    Args:
        G: ``(m_eq, n)`` equality rows (may have no rows).
        H: ``(m, n)`` inequality rows (may have no rows).
        lo, hi: optional per-coordinate box on ``y`` (``(n,)``; ``-inf`` / ``inf`` where unbounded).
        ruiz: equilibration of the lifted matrix (default: none, Pinet's default).
        sigma: DR step (Pinet's default 1.0); omega: relaxation in (0, 2) (Pinet's default 1.7).
        backward: ``implicit`` | ``fixed_point`` | ``unrolled`` (module docstring).
        n_iter_bwd: iterations of the implicit / fixed-point backward solve; bwd_tol: BiCGSTAB's relative
            tolerance (JAX's default 1e-5).
    """

    def __init__(
        self,
        G: np.ndarray,
        H: np.ndarray,
        lo: np.ndarray | None = None,
        hi: np.ndarray | None = None,
        ruiz: RuizSettings | None = None,
        sigma: float = 1.0,
        omega: float = 1.7,
        backward: str = "implicit",
        n_iter_bwd: int = 25,
        bwd_tol: float = 1e-5,
    ) -> None:
        super().__init__()
        G, H = np.atleast_2d(np.asarray(G, dtype=np.float64)), np.atleast_2d(np.asarray(H, dtype=np.float64))
        n = G.shape[1] if G.size else H.shape[1]
        G, H = G.reshape(-1, n), H.reshape(-1, n)
        if not (np.all(np.isfinite(G)) and np.all(np.isfinite(H))):
            raise ValueError("G and H must be finite")
        if not sigma > 0 or not 0 < omega < 2:
            raise ValueError(f"Douglas-Rachford needs sigma > 0 and 0 < omega < 2; got {sigma}, {omega}")
        if backward not in BACKWARDS:
            raise ValueError(f"backward must be one of {BACKWARDS}; got {backward!r}")
        if n_iter_bwd < 0 or bwd_tol < 0:
            raise ValueError(f"need n_iter_bwd >= 0 and bwd_tol >= 0; got {n_iter_bwd}, {bwd_tol}")
        m_eq, m = G.shape[0], H.shape[0]
        self.n, self.m_eq, self.m = n, m_eq, m
        self.sigma, self.omega, self.backward = float(sigma), float(omega), backward
        self.n_iter_bwd, self.bwd_tol = int(n_iter_bwd), float(bwd_tol)
        lifted = np.block([[G, np.zeros((m_eq, m))], [H, -np.eye(m)]])
        scaled, d_r, d_c = ruiz_equilibration(lifted, ruiz or RuizSettings())
        pinv = np.linalg.pinv(scaled)  # (n + m, m_eq + m)
        # P_eq(v) = v P' + g K' with P = I - A~^+ A~ (symmetric) and K = A~^+[:, :m_eq] diag(d_r[:m_eq])
        proj = np.eye(n + m) - pinv @ scaled
        proj = 0.5 * (proj + proj.T)
        K = pinv[:, :m_eq] * d_r[None, :m_eq]
        lo = np.full(n, -np.inf) if lo is None else np.broadcast_to(np.asarray(lo, dtype=np.float64), (n,))
        hi = np.full(n, np.inf) if hi is None else np.broadcast_to(np.asarray(hi, dtype=np.float64), (n,))
        if np.any(lo > hi):
            raise ValueError("the box on y has lo > hi")
        self.has_box = bool(np.isfinite(lo).any() or np.isfinite(hi).any())
        factor = projector_factor(proj)  # P = V V' where that saves multiply-adds (dr_loop.AffineProjection)
        extra = {} if factor is None else {"V": factor, "V_T": factor.T}
        c_y = 1.0 / (1.0 + 2.0 * self.sigma * d_c[:n] ** 2)  # the prox's affine part (_prox)
        self.consts = Float64Constants(
            P=proj, K=K, d=d_c[:n], d_slack=d_c[n:], lo=lo / d_c[:n], hi=hi / d_c[:n], **extra,
            C=np.r_[c_y, np.ones(m)], e_coef=2.0 * self.sigma * d_c[:n] * c_y,
        )
        self.factored = factor is not None
        self._graphs: dict = {}  # CUDA graphs of the no-gradient loop (hardlinear.layers.dr_loop)
        self.rank = int(np.linalg.matrix_rank(scaled)) if scaled.size else 0
        self.condition = float(np.linalg.cond(scaled)) if scaled.size else 1.0

    def extra_repr(self) -> str:
        return f"n={self.n}, m_eq={self.m_eq}, m_ineq={self.m}, sigma={self.sigma:.4g}, omega={self.omega}, backward={self.backward}"

    # --- the pieces of one iteration ------------------------------------------------------------------
    def _project_eq(self, s: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        (P,) = self.consts.get(("P",), s)
        return s @ P + q  # P symmetric

    def _step(self, s: torch.Tensor, y_raw: torch.Tensor, q: torch.Tensor, s_lo: torch.Tensor, s_hi: torch.Tensor) -> torch.Tensor:
        """``T(s, y_raw)``: one relaxed DR iteration in the scaled lifted space."""
        d, lo, hi = self.consts.get(("d", "lo", "hi"), s)
        z = self._project_eq(s, q)
        r = 2.0 * z - s
        ty = (2.0 * self.sigma * d * y_raw + r[:, : self.n]) / (1.0 + 2.0 * self.sigma * d * d)
        if self.has_box:
            ty = torch.clamp(ty, lo, hi)
        ts = torch.clamp(r[:, self.n :], s_lo, s_hi)
        return s + self.omega * (torch.cat([ty, ts], dim=1) - z)

    def _data(self, like: torch.Tensor, g: torch.Tensor, u: torch.Tensor, l: torch.Tensor | None):
        K, d_slack = self.consts.get(("K", "d_slack"), like)
        B = like.shape[0]
        g = g.to(like.dtype).expand(B, self.m_eq) if self.m_eq else like.new_zeros(B, 0)
        q = g @ K.T
        u = u.to(like.dtype).expand(B, self.m) if self.m else like.new_zeros(B, 0)
        l = torch.full_like(u, -torch.inf) if l is None else l.to(like.dtype).expand(B, self.m)
        return q, l / d_slack, u / d_slack

    def forward(
        self,
        y_raw: torch.Tensor,
        g: torch.Tensor,
        u: torch.Tensor,
        l: torch.Tensor | None = None,
        n_iter: int = 50,
        s0: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Project ``y_raw: (B, n)`` onto ``{G y = g, l <= H y <= u, box}`` by ``n_iter`` DR iterations.

        ``g: (B, m_eq)``, ``u, l: (B, m)`` (or broadcastable rows; ``l`` None is ``-inf``). ``s0`` warm-starts the
        governing sequence (default zeros). Returns the projected ``y`` and the final ``s_K`` (for a warm start).
        """
        if y_raw.dim() != 2 or y_raw.shape[1] != self.n:
            raise ValueError(f"y_raw must be (B, {self.n}); got {tuple(y_raw.shape)}")
        if n_iter < 0:
            raise ValueError(f"n_iter must be >= 0; got {n_iter}")
        q, s_lo, s_hi = self._data(y_raw, g, u, l)
        s = y_raw.new_zeros(y_raw.shape[0], self.n + self.m) if s0 is None else s0.to(y_raw.dtype)
        project = self._projection(y_raw, q)
        (d,) = self.consts.get(("d",), y_raw)
        if self.backward == "unrolled" or not torch.is_grad_enabled() or not y_raw.requires_grad:
            if n_iter:
                s = iterate(s, project, self._prox(y_raw, s_lo, s_hi), self.omega, [n_iter], self._graphs)[-1]
            return d * project.first(s, self.n), s
        if q.requires_grad or s_lo.requires_grad or s_hi.requires_grad:
            raise ValueError(
                f"backward={self.backward!r} differentiates with respect to y_raw only; g, l, u must not require "
                "grad (detach them, or use backward='unrolled')"
            )
        with torch.no_grad():
            if n_iter:
                s = iterate(s, project, self._prox(y_raw, s_lo, s_hi), self.omega, [n_iter], self._graphs)[-1]
        s_K = _ImplicitFixedPoint.apply(y_raw, s, self, q, s_lo, s_hi)
        return d * project.first(s_K, self.n), s_K.detach()

    def _projection(self, like: torch.Tensor, q: torch.Tensor) -> AffineProjection:
        """``Pi_E(s) = s P + q``, with the factor ``P = V V'`` where one was kept."""
        if self.factored:
            P, V, V_T = self.consts.get(("P", "V", "V_T"), like)
            return AffineProjection(P=P, q=q, V=V, V_T=V_T)
        return AffineProjection(P=self.consts.get(("P",), like)[0], q=q)

    def _prox(self, y_raw: torch.Tensor, s_lo: torch.Tensor, s_hi: torch.Tensor) -> ProxData:
        """The prox of :meth:`_step` in :mod:`~hardlinear.layers.dr_loop`'s form: ``C = (c_y, 1)``,
        ``e = (2 sigma d y_raw c_y, 0)`` with ``c_y = 1 / (1 + 2 sigma d^2)``, the box on ``y`` and ``[l, u]``."""
        C, e_coef, lo, hi = self.consts.get(("C", "e_coef", "lo", "hi"), y_raw)
        B = y_raw.shape[0]
        e = torch.cat([e_coef * y_raw, y_raw.new_zeros(B, self.m)], dim=1)
        box_lo, box_hi = lo.expand(B, self.n), hi.expand(B, self.n)  # -inf / inf where there is no box
        return ProxData(C, e, torch.cat([box_lo, s_lo.expand(B, self.m)], 1), torch.cat([box_hi, s_hi.expand(B, self.m)], 1),
                        bounded=self.has_box or self.m > 0)

    def _apply(self, fn, recurse: bool = True):  # noqa: ANN001 - torch's own signature
        self._graphs.clear()  # captured graphs hold the old constants
        return super()._apply(fn, recurse)

    def adjoint_solve(self, s: torch.Tensor, y_raw: torch.Tensor, q, s_lo, s_hi, v: torch.Tensor) -> torch.Tensor:
        """``J_{T,y_raw}' (I - J_{T,s}')^{-1} v`` at ``s``: the implicit gradient with respect to ``y_raw``."""
        with torch.enable_grad():
            s_ = s.detach().requires_grad_(True)
            y_ = y_raw.detach().requires_grad_(True)
            out = self._step(s_, y_, q, s_lo, s_hi)

            def jt_s(w: torch.Tensor) -> torch.Tensor:
                return torch.autograd.grad(out, s_, w, retain_graph=True)[0]

            if self.backward == "fixed_point":
                w = torch.zeros_like(v)
                for _ in range(self.n_iter_bwd):
                    w = jt_s(w) + v
            else:
                w = _bicgstab(lambda x: x - jt_s(x), v, self.n_iter_bwd, self.bwd_tol)
            return torch.autograd.grad(out, y_, w)[0]


class _ImplicitFixedPoint(torch.autograd.Function):
    """Identity on ``s_K`` in the forward pass; its backward is the implicit-function gradient to ``y_raw``."""

    @staticmethod
    def forward(ctx, y_raw, s, layer, q, s_lo, s_hi):  # noqa: ANN001, ANN205 - torch's signature
        ctx.save_for_backward(y_raw, s, q, s_lo, s_hi)
        ctx.layer = layer
        return s.clone()

    @staticmethod
    def backward(ctx, grad_s):  # noqa: ANN001, ANN205
        y_raw, s, q, s_lo, s_hi = ctx.saved_tensors
        grad_y = ctx.layer.adjoint_solve(s, y_raw, q, s_lo, s_hi, grad_s)
        return grad_y, None, None, None, None, None
