"""Gauge map onto C(x) with the decision rule as the interior point (Tabas & Zhang; LOOP-LC, Li et al. 2023).

Gauge mapping needs a point strictly inside the polytope for every input; its authors solve an optimisation
per input to get one. The decision rule ``y0(x) = F x`` is one in closed form: its slack ``s0(x) = h(x) -
H(x) y0(x)`` is at least the certified margin ``t* > 0`` on every row for every x in the box. Around it, in the
null-space coordinates of the equalities (:mod:`hardlinear.layers.peers.reduced`, the proposed layer's own basis),

    y = y0(x) + N u,      P(x) = {u : M(x) u <= s0(x)},   M = H N,

and the gauge of a direction ``z`` is ``gamma(z) = max_i (M z)_i / s0_i`` (positively homogeneous; ``P`` is
``{u : gamma(u) <= 1}``). A network output ``z`` in the unit inf-ball (``tanh``) is mapped to

    u = z ||z||_inf / gamma(z)      (u = 0 for z = 0),

so ``gamma(u) = ||z||_inf``: the inf-ball's shells go onto the polytope's level sets, a bijection of the ball
onto ``P`` when ``P`` is bounded (``gamma(z) > 0`` for every ``z != 0``). Every output is feasible; there is no
infeasible output to pull back, and no part of the network's range is wasted or collapsed.

Unbounded directions (``M d <= 0``, so ``gamma(d) <= 0``): the set-up checks boundedness by an LP per
coordinate direction; if ``P`` is unbounded, ``radius = R`` adds the rows ``|u_j| <= R`` (the gauge becomes
``max(gamma(z), ||z||_inf / R)``: the map is onto ``P`` intersected with that box), and without ``radius`` the
map does not apply (:class:`NotApplicable`).

``margin = delta``: the map aims at ``M u <= (1 - delta) s0`` so that every row keeps a slack of at least
``delta s0_i >= delta t*``, which absorbs the float64 rounding of the output (default 1e-9, a relative shrink of
the polytope far below any reported gap). Inputs outside the box, or a rule with ``t* <= 0``: ``s0`` may be 0 or
negative on some row; such rows get ``s0 = tiny``, so directions that increase them are scaled to ~0 (the
output is then ``y0`` itself, as feasible as the rule). A non-finite ``z`` entry is treated as 0.
"""

from __future__ import annotations

import numpy as np
import scipy.optimize
import torch
from torch import nn

from hardlinear.constraints.family import ConstraintFamily
from hardlinear.errors import NotApplicable
from hardlinear.layers.feasibility import _module_dtype
from hardlinear.layers.peers.reduced import ReducedInequalities, check_inputs


def unbounded_directions(M: np.ndarray) -> list[int]:
    """Signed coordinates ``+-(j + 1)`` along which ``{u : M u <= 0}`` extends (LPs ``max +-u_j`` s.t.
    ``M u <= 0, |u| <= 1``); empty iff the polytope ``{u : M u <= s}`` (``s > 0``) is bounded."""
    m, d = M.shape
    out = []
    for j in range(d):
        for sign in (1.0, -1.0):
            c = np.zeros(d)
            c[j] = -sign
            res = scipy.optimize.linprog(c, A_ub=M if m else None, b_ub=np.zeros(m) if m else None, bounds=(-1, 1), method="highs")
            if res.status == 0 and -res.fun > 1e-9:
                out.append(int(sign * (j + 1)))
    return out


class GaugeMap(nn.Module):
    """``forward(xi: (B, k), z: (B, d)) -> y: (B, n)``, ``z`` in the unit inf-ball; see the module docstring.

    Args:
        family: the constraint family (constant ``G``).
        rule: the safe point ``y0``, a module ``xi: (B, k) -> (B, n)`` feasible on the box (the decision rule).
        margin: relative slack ``delta`` kept on every row.
        radius: box ``|u_j| <= R`` added when the polytope is unbounded (None: unbounded raises NotApplicable).
        checks: inputs at which a varying ``M(x)`` is checked for boundedness.
    """

    def __init__(
        self,
        family: ConstraintFamily,
        rule: nn.Module,
        margin: float = 1e-9,
        radius: float | None = None,
        checks: int = 8,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if not 0.0 <= margin < 1.0:
            raise ValueError(f"margin must be in [0, 1); got {margin}")
        if radius is not None and not radius > 0:
            raise ValueError(f"radius must be > 0 (or None); got {radius}")
        self.reduced = ReducedInequalities(family, "the gauge map")
        self.rule, self.margin, self.radius = rule, float(margin), radius
        self.d, self.m = self.reduced.d, self.reduced.m
        if self.d == 0:
            raise NotApplicable("the gauge map needs a free dimension; the equalities fix every variable")
        if self.radius is None:
            xi = check_inputs(family.box, checks, generator or torch.Generator().manual_seed(0))
            Ms = self.reduced.rows(xi, xi)
            Ms = [Ms.numpy()] if Ms.dim() == 2 else [M.numpy() for M in Ms]
            for M in Ms:
                free = unbounded_directions(M)
                if free:
                    raise NotApplicable(
                        f"the gauge map needs the feasible set in the {self.d} free coordinates to be bounded; it "
                        f"extends along coordinate direction(s) {free[:6]} (set method.radius to map onto its "
                        f"intersection with a box |u_j| <= radius)"
                    )
        self._last: tuple[torch.Tensor, ...] | None = None

    def extra_repr(self) -> str:
        return f"d={self.d}, m_ineq={self.m}, margin={self.margin}, radius={self.radius}"

    def base(self, xi: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        """``y0(x): (B, n)`` in ``like``'s dtype."""
        dtype = _module_dtype(self.rule) or like.dtype
        return self.rule(xi.to(dtype)).to(like.dtype)

    def forward(self, xi: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k), z: (B, d) -> (B, n)`` in ``z``'s dtype; ``z`` must lie in the unit inf-ball."""
        if z.dim() != 2 or z.shape[1] != self.d:
            raise ValueError(f"z must be (B, {self.d}) (the free coordinates); got {tuple(z.shape)}")
        z = torch.where(torch.isfinite(z), z, 0.0)
        y0 = self.base(xi, z)
        tiny = torch.finfo(z.dtype).tiny
        s0 = self.reduced.slack(xi, y0)
        s0_safe = ((1.0 - self.margin) * s0).clamp_min(tiny)
        Mz = self.reduced.times(self.reduced.rows(xi, z), z)  # (B, m)
        size = z.abs().amax(dim=1)  # ||z||_inf: (B,)
        gauge = (Mz / s0_safe).amax(dim=1) if self.m else torch.zeros_like(size)
        if self.radius is not None:
            gauge = torch.maximum(gauge, size / self.radius)
        positive = gauge > 0
        scale = torch.where(positive, size / torch.where(positive, gauge, 1.0), 0.0)
        self._last = (size.detach(), gauge.detach(), (s0.amin(dim=1) if self.m else size.new_ones(len(size))).detach())
        return self.reduced.lift_back(y0, z * scale.unsqueeze(1))

    @property
    def last_stats(self) -> dict[str, torch.Tensor]:
        """``level (B,)``: ``||z||_inf``, the gauge value of the output (1 = on the boundary);
        ``safe_infeasible (B,)``: the rule's slack is not positive on some row (outside the box, or t* <= 0)."""
        if self._last is None:
            return {}
        size, _, s0_min = self._last
        return {"level": size, "safe_infeasible": s0_min <= 0}
