"""Inequalities in the null-space coordinates of the equalities, shared by HardNet-Aff and the gauge map.

For a constant ``G`` the affine set ``{y : G y = g(x)}`` is ``{c(x) + N u : u in R^d}`` with ``N: (n, d)`` an
orthonormal basis of ``null(G)`` and ``c(x) = G^+ g(x)``: the very factorisation the proposed layer's equality
projector holds (:class:`~hardlinear.layers.equality.EqualityProjector` in its null form). The inequalities
``H(x) y <= h(x)`` then read, around any base point ``y_b`` of the affine set,

    M(x) u <= h(x) - H(x) y_b,     M(x) = H(x) N: (m, d), or (B, m, d) per input when ``H`` depends on x.

An input-dependent ``G(x)`` has no basis that varies continuously with x (a batched SVD's signs and rotations
jump), so a network cannot learn coordinates in it: the methods built on this module do not apply there.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from hardlinear.constraints.family import ConstraintFamily, InputDependentFamily, lift
from hardlinear.errors import NotApplicable
from hardlinear.layers.equality import EqualityProjector, Float64Constants, constant_lhs
from hardlinear.layers.feasibility import SlackOperator


class ReducedInequalities(nn.Module):
    """``N``, ``c(x)`` and ``M(x) = H(x) N`` of a family with a constant ``G`` (module docstring).

    Raises :class:`NotApplicable` (naming ``method``) when ``G`` depends on the input.
    """

    def __init__(self, family: ConstraintFamily, method: str) -> None:
        super().__init__()
        self.n, self.m, self.k = family.n, family.m_ineq, family.k
        G = constant_lhs(family, "G") if family.m_eq else np.zeros((0, family.n))
        if G is None:
            raise NotApplicable(
                f"{method} works in the null-space coordinates of a constant equality matrix; this form's "
                f"G(x) ({family.m_eq} x {family.n}) depends on the input (use form=inequality where G is constant)"
            )
        self.projector = EqualityProjector(family, form="null") if family.m_eq else None
        N = self.projector.consts.basis.numpy() if self.projector is not None else np.eye(family.n)
        self.d = N.shape[1]
        self.rank_eq = family.n - self.d
        H = constant_lhs(family, "H")
        self.input_dependent = H is None
        if self.input_dependent:
            assert isinstance(family, InputDependentFamily)
            M_stack = np.einsum("jmn,nd->jmd", family.H_stack, N)  # (k + 1, m, d)
            self.consts = Float64Constants(N=N, M_flat=M_stack.reshape(family.k + 1, -1))
        else:
            self.consts = Float64Constants(N=N, M=H @ N)
        self.slacks = SlackOperator(family)

    def extra_repr(self) -> str:
        return f"n={self.n}, d={self.d}, m_ineq={self.m}, input_dependent={self.input_dependent}"

    def rows(self, xi: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        """``M(x)`` in ``like``'s dtype: ``(m, d)`` for a constant ``H``, else ``(B, m, d)``."""
        if not self.input_dependent:
            return self.consts.get(("M",), like)[0]
        (M_flat,) = self.consts.get(("M_flat",), like)
        return (lift(xi.to(like.dtype)) @ M_flat).view(-1, self.m, self.d)

    def times(self, M: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """``M u`` for ``u: (B, d)`` -> ``(B, m)``, ``M`` as :meth:`rows` returns it."""
        return u @ M.T if M.dim() == 2 else (M @ u.unsqueeze(2)).squeeze(2)

    def particular(self, xi: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        """``c(x) = G^+ g(x): (B, n)``, the point of the affine set nearest the origin (0 without equalities)."""
        if self.projector is None:
            return like.new_zeros(xi.shape[0], self.n)
        return self.projector.affine_parametrisation(xi, like)[1]

    def lift_back(self, base: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """``base + N u``: ``(B, n), (B, d) -> (B, n)``."""
        (N,) = self.consts.get(("N",), u)
        return base + u @ N.T

    def slack(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``h(x) - H(x) y: (B, m)`` (``>= 0`` is feasible)."""
        return self.slacks.slack(xi.to(y.dtype), y, self.slacks.rhs(xi, y))


def check_inputs(box, count: int, generator: torch.Generator) -> torch.Tensor:
    """Inputs at which a per-input condition is checked: the box's centre, up to ``count`` of its vertices and
    ``count`` uniform samples, ``(<= 2 count + 1, k)`` float64."""
    mid = torch.as_tensor(box.mid, dtype=torch.float64).unsqueeze(0)
    return torch.cat([mid, box.vertices(limit=count, generator=generator), box.sample(count, generator)])
