"""E2ELR's repair layers (Chen, Tanneau, Van Hentenryck, IEEE TPWRS 2024; ``AI4OPT/ML4OPF``
``ml4opf/layers/bound_repair.py`` and ``hypersimplex_repair.py``), written from the math.

* Bound repair: a raw output ``z`` into ``[pmin, pmax]``, by a scaled sigmoid ``pmin + s(z) (pmax - pmin)`` or by
  clamping.
* Power-balance repair by proportional response: with ``D`` the demand and ``P = sum p``, every generator moves the
  same fraction ``r`` of the way to its upper bound when ``P < D`` (``r = (D - P) / (sum pmax - P)``) or to its
  lower bound when ``P > D`` (``r = (P - D) / (P - sum pmin)``). Then ``sum p = D`` and each ``p`` stays between
  its old value and a bound, so in ``[pmin, pmax]``, for every ``D`` in ``[sum pmin, sum pmax]``.

In float64 the balance holds to rounding (~1e-16 relative); a final clamp keeps the bounds exact whatever the
rounding of the blend (it moves a value by at most an ulp). A demand outside ``[sum pmin, sum pmax]`` has no
feasible dispatch: ``r`` is clipped to 1 and the balance left violated, as measured (``last_stats``).
"""

from __future__ import annotations

import torch

BOUND_REPAIRS = ("sigmoid", "clamp")


def bound_repair(z: torch.Tensor, pmin: torch.Tensor, pmax: torch.Tensor, kind: str = "sigmoid") -> torch.Tensor:
    """``z: (B, G) -> p: (B, G)`` in ``[pmin, pmax]``."""
    if kind == "sigmoid":
        return pmin + torch.sigmoid(z) * (pmax - pmin)
    if kind == "clamp":
        return torch.minimum(torch.maximum(z, pmin), pmax)
    raise ValueError(f"bound_repair must be one of {BOUND_REPAIRS}; got {kind!r}")


def proportional_response(
    p: torch.Tensor, demand: torch.Tensor, pmin: torch.Tensor, pmax: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``p: (B, G)`` within bounds, ``demand: (B,)`` -> (``p': (B, G)`` with ``sum p' = demand``, the fraction
    ``r: (B,)`` moved towards the bounds). Rows with ``sum p = demand`` are left as they are."""
    total = p.sum(dim=1)
    short = total < demand  # move up towards pmax
    room = torch.where(short, pmax.sum() - total, total - pmin.sum())
    need = (demand - total).abs()
    safe_room = torch.where(room > 0, room, torch.ones_like(room))
    ratio = torch.where(room > 0, need / safe_room, torch.where(need > 0, 1.0, 0.0)).clamp(max=1.0)
    target = torch.where(short.unsqueeze(1), pmax.expand_as(p), pmin.expand_as(p))
    repaired = p + ratio.unsqueeze(1) * (target - p)
    return torch.minimum(torch.maximum(repaired, pmin), pmax), ratio
