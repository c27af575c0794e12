"""HardNet-Aff's closed-form correction (Min, Azizan et al., "Hard-constrained neural networks"), written from
the paper's formula, for ``C(x) = {y : G y = g(x), H(x) y <= h(x)}`` with a constant ``G``.

Equalities are eliminated first, as HardNet's own code does for DC3's problems (its ``complete_partial``: the
network predicts the free variables, the equalities complete the rest); here the free coordinates are those of
an orthonormal basis of ``null(G)`` (:mod:`hardlinear.layers.peers.reduced`) rather than a subset of the variables,
which spans the same affine set. With ``y = c(x) + N u`` the inequalities are ``M(x) u <= s(x)``,
``M = H N: (m, d)``, ``s = h - H c``, and the correction of a network output ``u`` is

    u* = u - M(x)^+ ReLU(M(x) u - s(x)).

If ``M(x)`` has full row rank (``m <= d``), ``M M^+ = I`` and ``M u* = min(M u, s)`` row by row: every violated
row lands on its bound, every satisfied row is left where it was. Without full row rank ``M M^+`` is not the
identity and nothing is guaranteed, so the layer refuses such families (:class:`NotApplicable`): for a
constant ``H`` the rank is exact (an SVD); for ``H(x)`` it is checked at the box's centre, vertices and random
inputs, and an input where the rank is lost anyway gets the pseudo-inverse's least-squares correction (not
feasible; counted in ``last_stats["rank_deficient"]``).

Rounding: the corrected rows sit exactly on their bounds, so float64 rounding may cross them by about
``eps cond(M) (||M||_inf ||u||_inf + ||s||_inf)`` (the test suite measures it). That is a promise relative to
the size of ``u``: a network output scaled by 1e30 on DC3's QP crossed its bounds by 1.8e17. So the layer keeps
the bound itself below ``rounding_tol (1 + ||s||_inf)``: a row whose ``||u||_inf`` exceeds the size where that
fails is scaled back onto it (its direction kept, differentiable), and a row with a NaN or infinite entry is
replaced by ``u = 0`` (HardNet has no safe output; ``u = 0``, i.e. ``c(x)`` corrected, is its nearest
substitute). Both kinds are counted in ``last_stats["nonfinite"]`` (the proposed layer's name for the rows it
hands to its safe output), and no NaN reaches the output or the gradient.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from hardlinear.constraints.family import ConstraintFamily
from hardlinear.errors import NotApplicable
from hardlinear.layers.equality import Float64Constants
from hardlinear.layers.peers.reduced import ReducedInequalities, check_inputs


def _rank(singular_values: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """Numerical rank of each matrix from its singular values ``(..., min(shape))``: LAPACK's default tolerance."""
    tol = max(shape) * torch.finfo(torch.float64).eps * singular_values.amax(dim=-1, keepdim=True)
    return (singular_values > tol).sum(dim=-1)


class HardNetAffLayer(nn.Module):
    """``forward(xi: (B, k), u: (B, d)) -> y: (B, n)``: HardNet-Aff's correction in null-space coordinates.

    Args:
        family: the constraint family (constant ``G``; ``H`` constant or affine in x).
        checks: vertices and random inputs at which a varying ``M(x)``'s rank is checked at set-up.
        generator: seeds those inputs.
        rounding_tol: the correction's rounding bound is kept below ``rounding_tol (1 + ||s||_inf)`` by capping
            ``||u||_inf`` (module docstring); trained outputs on DC3's QPs sit ~6 orders of magnitude below the cap.
    """

    def __init__(
        self, family: ConstraintFamily, checks: int = 32, generator: torch.Generator | None = None,
        rounding_tol: float = 1e-9,
    ) -> None:
        super().__init__()
        if not rounding_tol > 0:
            raise ValueError(f"rounding_tol must be > 0; got {rounding_tol}")
        self.rounding_tol = float(rounding_tol)
        if family.m_eq + family.m_ineq > family.n:
            # Checked first as it holds whatever G is: rank [H; G] <= n, and HardNet needs it to be m_eq + m_ineq.
            raise NotApplicable(
                f"HardNet-Aff needs the stacked constraint matrix [H; G] (equalities as two-sided rows) to have full "
                f"row rank, so at most n rows; this form has {family.m_ineq} inequality + {family.m_eq} equality rows "
                f"for n = {family.n} variables"
            )
        self.reduced = ReducedInequalities(family, "HardNet-Aff")
        m, d = self.reduced.m, self.reduced.d
        self.m, self.d = m, d
        where = (
            f"{d} free dimension(s) (n = {family.n} variables, equality rank {self.reduced.rank_eq}) against {m} "
            f"inequality rows"
        )
        if m > d:
            raise NotApplicable(
                f"HardNet-Aff needs the stacked constraint matrix of the free variables (the inequality rows in the "
                f"null space of the equalities, H N) to have full row rank, so at most as many rows as free "
                f"dimensions; this form has {where}"
            )
        self._last: tuple[torch.Tensor, ...] | None = None
        if not self.reduced.input_dependent:
            M = self.reduced.consts.get(("M",), torch.empty(0, dtype=torch.float64))[0].numpy()
            U, s, Vt = np.linalg.svd(M, full_matrices=False)
            rank = int(_rank(torch.as_tensor(s), M.shape)) if m else 0
            if rank < m:
                raise NotApplicable(
                    f"HardNet-Aff needs H N (inequality rows on the free variables) to have full row rank; it has "
                    f"rank {rank} < {m} rows ({where})"
                )
            self.pinv = Float64Constants(M_pinv=(Vt.T / s) @ U.T if m else np.zeros((d, 0)))
            self.condition = float(s[0] / s[-1]) if m else 1.0
            return
        xi = check_inputs(family.box, checks, generator or torch.Generator().manual_seed(0))
        M = self.reduced.rows(xi, xi)
        s = torch.linalg.svdvals(M)
        ranks = _rank(s, (m, d))
        bad = torch.nonzero(ranks < m).flatten()
        if bad.numel():
            i = int(bad[0])
            raise NotApplicable(
                f"HardNet-Aff needs H(x) N to have full row rank at every input; at {bad.numel()} of {len(xi)} checked "
                f"inputs it does not (e.g. xi = {np.round(xi[i].numpy(), 4).tolist()}: rank {int(ranks[i])} < {m}; {where})"
            )
        self.pinv = None
        self.condition = float((s[:, 0] / s[:, -1]).max())

    def extra_repr(self) -> str:
        return f"m_ineq={self.m}, d={self.d}, condition={self.condition:.3g}"

    def forward(self, xi: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k), u: (B, d) -> (B, n)`` in ``u``'s dtype (run it in float64 where feasibility is reported)."""
        if u.dim() != 2 or u.shape[1] != self.d:
            raise ValueError(f"u must be (B, {self.d}) (the free coordinates); got {tuple(u.shape)}")
        c = self.reduced.particular(xi, u)
        s = self.reduced.slack(xi, c)
        M = self.reduced.rows(xi, u)
        u, hostile = self._tame(u, M, s)
        excess = torch.relu(self.reduced.times(M, u) - s)  # (B, m)
        deficient = torch.zeros(u.shape[0], dtype=torch.bool, device=u.device)
        if self.pinv is not None:
            (M_pinv,) = self.pinv.get(("M_pinv",), u)
            u = u - excess @ M_pinv.T
        else:
            u = u - (torch.linalg.pinv(M) @ excess.unsqueeze(2)).squeeze(2)
            with torch.no_grad():
                deficient = _rank(torch.linalg.svdvals(M), (self.m, self.d)) < self.m
        self._last = (excess.detach(), deficient, hostile)
        return self.reduced.lift_back(c, u)

    def _tame(self, u: torch.Tensor, M: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``u`` with non-finite rows set to 0 and rows too large for the rounding bound scaled back onto it;
        and ``(B,)`` flags of those rows (module docstring). No device sync unless a row needs it."""
        with torch.no_grad():
            finite = torch.isfinite(u).all(dim=1)
        u = torch.where(finite.unsqueeze(1), u, 0.0)  # before any arithmetic: NaN * 0 would reach the gradient
        with torch.no_grad():
            unit = torch.finfo(u.dtype).eps * self.condition
            row_norm = M.abs().sum(dim=-1).amax(dim=-1)  # ||M||_inf: () or (B,)
            s_size = s.abs().amax(dim=1) if s.shape[1] else s.new_zeros(s.shape[0])
            limit = (self.rounding_tol * (1.0 + s_size) - unit * s_size).clamp_min(0.0) / (unit * row_norm + 1e-300)
            size = u.abs().amax(dim=1) if u.shape[1] else u.new_zeros(u.shape[0])
            over = size > limit
            hostile = over | ~finite
        if bool(over.any()):
            factor = torch.where(over, limit / size.clamp_min(1e-300), 1.0)
            u = u * factor.unsqueeze(1)
        return u, hostile

    @property
    def last_stats(self) -> dict[str, torch.Tensor]:
        """``corrected (B,)``: rows the correction moved; ``rank_deficient (B,)``: inputs where ``M(x)`` lost rank;
        ``nonfinite (B,)``: network outputs that were non-finite or too large for the rounding bound (tamed)."""
        if self._last is None:
            return {}
        excess, deficient, hostile = self._last
        moved = (excess > 0).any(dim=1) if excess.shape[1] else torch.zeros_like(deficient)
        return {"corrected": moved, "rank_deficient": deficient, "nonfinite": hostile}
