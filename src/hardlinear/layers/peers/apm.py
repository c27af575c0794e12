"""Alternating projections (APM) and their extrapolated variant (EAPM) in the paper's standard form.

In the standard form the feasible set is ``V ∩ C`` with the affine set ``V = {(y, s) : G y = g, H y + s = h}``
and the convex set ``C = {(y, s) : s >= 0}``, whose projection clamps the slacks at zero. ``P_V`` is the
orthogonal projection onto ``V`` (:class:`hardlinear.layers.equality.EqualityProjector`, or any module with the
same ``forward(xi, y) -> y``).

Both methods start from ``x_0 = P_V(y_net)`` and keep every iterate in ``V`` (equalities exact); an instance
stops once its largest slack violation ``max_i max(-s_i, 0)`` (= the largest violation of ``H y <= h``) is
``<= tol``, or after ``max_iter`` iterations. One iteration is one ``P_C`` and one ``P_V``:

* APM:  ``x_{t+1} = P_V P_C x_t``.
* EAPM (Bauschke, Combettes & Kruk 2006, "Extrapolation algorithm for affine-convex feasibility problems",
  with one affine set and one convex set): with ``p = P_C x_t`` and ``q = P_V p``,

      x_{t+1} = x_t + lambda * L_t * (q - x_t),     L_t = ||p - x_t||^2 / ||q - x_t||^2  (>= 1).

  Why it is safe: for ``x_t`` in ``V``, the half-space ``{z : <z - p, x_t - p> <= 0}`` contains ``C`` and its
  trace on ``V`` is ``{z in V : <z - x_t, x_t - q> <= -||x_t - p||^2}``; ``x_t + L_t (q - x_t)`` is exactly the
  projection of ``x_t`` onto that trace, so every step with ``lambda`` in ``(0, 2)`` moves no farther from any
  point of ``V ∩ C`` (Fejér monotone) and stays in ``V``; ``L_t = 1`` is the APM step.
  Safeguard: ``L_t`` is clipped to ``[1, max_extrapolation]`` and set to 1 when ``||q - x_t|| = 0`` (then
  ``x_t`` is a fixed point of ``P_V P_C``: feasible, or ``V ∩ C`` is empty and no step helps). The clip bounds
  a step by ``sqrt(max_extrapolation)`` times the distance to ``C``, where ``V ∩ C`` is empty or rounding
  makes ``||q - x_t||`` unreliable. The extrapolated point is passed through ``P_V`` once more: a no-op in
  exact arithmetic, but without it the rounding residual of ``x_t`` grows by ``|1 - lambda L_t|`` per
  iteration (measured: equality residuals of 4e-4 after 65 iterations on the portfolio). So an EAPM
  iteration costs two ``P_V``, an APM iteration one.

``iterations`` per instance counts the iterations after ``x_0`` (0 when ``P_V(y_net)`` is already within
``tol``).

**Null-space coordinates.** ``V = {N u + c(x)}`` with ``N`` an orthonormal null-space basis and ``c``
orthogonal to it (:meth:`EqualityProjector.affine_parametrisation`: one basis for a constant ``G``, one per
instance, by a batched SVD computed once per call, for ``G(x)``). With ``d = max(-s,
0)`` the slacks' deficit at ``x = N u + c`` (so ``P_C x = x + d``), one APM iteration is ``u <- u + N_S' d``
(``N_S``: the slack rows of ``N``), and EAPM's is ``u <- u + lambda L N_S' d`` with ``||p - x|| = ||d||`` and
``||q - x|| = ||N_S' d||``: the same iterates as above, for two thin products per iteration instead of an
``n``-wide projection, and every iterate is in ``V`` exactly (no re-projection). This path is taken whenever
the projector offers it (``coordinates=True``, the default); the generic path above is the reference
(``tests/test_baselines.py`` checks that both give the same iterates).
"""

from __future__ import annotations

import torch
from torch import nn

# ||q - x||^2 at or below this (relative to ||p - x||^2) counts as zero: no extrapolation.
TINY = 1e-30


class AlternatingProjection(nn.Module):
    """``xi: (B, k), y: (B, n) -> (y: (B, n), iterations: (B,))``; slacks are ``y[:, slack_start:]``."""

    def __init__(
        self,
        projector: nn.Module,
        slack_start: int,
        tol: float = 1e-4,
        max_iter: int = 300,
        extrapolate: bool = False,
        relaxation: float = 1.0,
        max_extrapolation: float = 1e4,
        coordinates: bool = True,
    ) -> None:
        super().__init__()
        if slack_start < 0:
            raise ValueError(f"slack_start must be >= 0; got {slack_start}")
        if tol < 0 or max_iter < 0:
            raise ValueError(f"need tol >= 0 and max_iter >= 0; got tol={tol}, max_iter={max_iter}")
        if not 0.0 < relaxation < 2.0:
            raise ValueError(f"relaxation must be in (0, 2) for the extrapolated step to be Fejér; got {relaxation}")
        if max_extrapolation < 1.0:
            raise ValueError(f"max_extrapolation must be >= 1; got {max_extrapolation}")
        self.projector = projector
        self.slack_start = int(slack_start)
        self.tol, self.max_iter = float(tol), int(max_iter)
        self.extrapolate, self.relaxation = bool(extrapolate), float(relaxation)
        self.max_extrapolation = float(max_extrapolation)
        self.coordinates = bool(coordinates)

    def violation(self, y: torch.Tensor) -> torch.Tensor:
        """``(B, n) -> (B,)``: largest ``max(-s, 0)``."""
        s = y[:, self.slack_start :]
        return (-s).clamp(min=0.0).amax(dim=1) if s.shape[1] else y.new_zeros(y.shape[0])

    def project_c(self, y: torch.Tensor) -> torch.Tensor:
        """``P_C``: clamp the slacks at zero."""
        return torch.cat([y[:, : self.slack_start], y[:, self.slack_start :].clamp(min=0.0)], dim=1)

    def step(self, xi: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """One APM or EAPM iteration from ``x`` in ``V``."""
        p = self.project_c(x)
        q = self.projector(xi, p)
        if not self.extrapolate:
            return q
        scale = self.extrapolation(((p - x) ** 2).sum(dim=1), ((q - x) ** 2).sum(dim=1))
        # In exact arithmetic the step stays in V; in floating point it scales x's own residual by (1 - L)
        # every iteration, which compounds, so the step is projected onto V again.
        return self.projector(xi, x + self.extrapolated(q - x, scale))

    def extrapolation(self, d_pc: torch.Tensor, d_q: torch.Tensor) -> torch.Tensor:
        """``(B,), (B,) -> (B,)``: ``lambda * L`` from ``||p - x||^2`` and ``||q - x||^2`` (module docstring).

        No gradient flows through ``L`` (a step length): see :meth:`extrapolated`."""
        d_pc, d_q = d_pc.detach(), d_q.detach()
        moved = d_q > TINY * d_pc.clamp(min=TINY)
        L = torch.where(moved, d_pc / d_q.clamp(min=TINY), torch.ones_like(d_q))
        return self.relaxation * L.clamp(min=1.0, max=self.max_extrapolation)

    @staticmethod
    def extrapolated(step: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """``scale * step`` (``step: (B, m)``, ``scale: (B,)``), differentiated as ``step`` alone.

        Why: unrolled for training, the exact Jacobian of ``x + L (q - x)`` multiplies the gradient by up to
        ``L`` (clipped at 1e4) per iteration, and it overflowed float32 within a few iterations (NaN in the
        network: EAPM on the portfolio, epoch 188 of a paper run). The extrapolated part ``(L - 1) step`` is
        therefore a constant in the backward pass, which keeps the APM step's Jacobian, a composition of
        projections (non-expansive). The forward value is unchanged; with no gradient recorded it is the plain
        product.
        """
        if not torch.is_grad_enabled() or not step.requires_grad:
            return scale.unsqueeze(1) * step
        return step + ((scale - 1.0).unsqueeze(1) * step).detach()

    def forward(self, xi: torch.Tensor, y: torch.Tensor, max_iter: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Project ``y`` to ``V``, then iterate; ``max_iter`` overrides the module's limit for this call (the
        unrolled training passes use their own). Differentiable: every step is a clamp and an affine map."""
        limit = self.max_iter if max_iter is None else int(max_iter)
        param = None
        if self.coordinates and self.slack_start < y.shape[1]:
            get = getattr(self.projector, "affine_parametrisation", None)
            with torch.no_grad():  # a function of the input only: no gradient flows through it
                param = get(xi, y) if get is not None else None
        if param is not None:
            return self._forward_coordinates(y, *param, limit)
        x = self.projector(xi, y)
        iterations = torch.zeros(y.shape[0], dtype=torch.long, device=y.device)
        active = self.violation(x) > self.tol
        for _ in range(limit):
            if not torch.compiler.is_exporting() and not bool(active.any()):  # exported: all steps, the same rows
                break
            x = torch.where(active.unsqueeze(1), self.step(xi, x), x)
            iterations = iterations + active.long()
            active = active & (self.violation(x) > self.tol)
        return x, iterations

    def _forward_coordinates(
        self, y: torch.Tensor, N: torch.Tensor, c: torch.Tensor, limit: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The same iterations on the null-space coordinates ``u`` (module docstring); ``N`` is ``(n, b)``
        for a constant ``G`` or ``(B, n, b)`` per instance."""
        s0 = self.slack_start
        c_S = c[:, s0:]
        if N.dim() == 2:
            N_S = N[s0:]

            def to_u(v: torch.Tensor) -> torch.Tensor:  # (B, n) -> (B, b): v N
                return v @ N

            def deficit(u: torch.Tensor) -> torch.Tensor:
                return (-(torch.addmm(c_S, u, N_S.T))).clamp(min=0.0)

            def step(d: torch.Tensor) -> torch.Tensor:
                return d @ N_S

            def back(u: torch.Tensor) -> torch.Tensor:
                return torch.addmm(c, u, N.T)
        else:
            N_S = N[:, s0:]

            def to_u(v: torch.Tensor) -> torch.Tensor:
                return (v.unsqueeze(1) @ N).squeeze(1)

            def deficit(u: torch.Tensor) -> torch.Tensor:
                return (-((N_S @ u.unsqueeze(2)).squeeze(2) + c_S)).clamp(min=0.0)

            def step(d: torch.Tensor) -> torch.Tensor:
                return (d.unsqueeze(1) @ N_S).squeeze(1)

            def back(u: torch.Tensor) -> torch.Tensor:
                return (N @ u.unsqueeze(2)).squeeze(2) + c

        u = to_u(y)  # x_0 = P_V(y) = N N' y + c
        d = deficit(u)
        iterations = torch.zeros(y.shape[0], dtype=torch.long, device=y.device)
        active = d.amax(dim=1) > self.tol
        for _ in range(limit):
            if not torch.compiler.is_exporting() and not bool(active.any()):  # exported: all steps, the same rows
                break
            du = step(d)
            if self.extrapolate:
                du = self.extrapolated(du, self.extrapolation((d**2).sum(dim=1), (du**2).sum(dim=1)))
            u = torch.where(active.unsqueeze(1), u + du, u)
            iterations = iterations + active.long()
            d = deficit(u)
            active = active & (d.amax(dim=1) > self.tol)
        return back(u), iterations
