"""E2ELR's repair layers (Chen, Tanneau, Van Hentenryck, IEEE TPWRS 2024; ``AI4OPT/ML4OPF``
``ml4opf/layers/bound_repair.py`` and ``hypersimplex_repair.py``), written from the math.

* Bound repair: a raw output ``z`` into ``[pmin, pmax]``, by a scaled sigmoid ``pmin + s(z) (pmax - pmin)`` or by
  clamping.
* Power-balance repair by proportional response (the map itself lives with the dispatch's other maps onto the
  balance, :func:`~hardlinear.problems.dispatch_projection.proportional_box_sum`, which the proposed method's
  ``refine_geometry=proportional`` uses too): with ``D`` the demand and ``P = sum p``, every generator moves the
  same fraction ``r`` of the way to its upper bound when ``P < D`` (``r = (D - P) / (sum pmax - P)``) or to its
  lower bound when ``P > D`` (``r = (P - D) / (P - sum pmin)``). Then ``sum p = D`` and each ``p`` stays between
  its old value and a bound, so in ``[pmin, pmax]``, for every ``D`` in ``[sum pmin, sum pmax]``.

In float64 the balance holds to rounding (~1e-16 relative); a final clamp keeps the bounds exact whatever the
rounding of the blend (it moves a value by at most an ulp). A demand outside ``[sum pmin, sum pmax]`` has no
feasible dispatch: ``r`` is clipped to 1 and the balance left violated, as measured (``last_stats``).
"""

from __future__ import annotations

import torch

from hardlinear.problems.dispatch_projection import proportional_box_sum as proportional_response  # noqa: F401

BOUND_REPAIRS = ("sigmoid", "clamp")


def bound_repair(z: torch.Tensor, pmin: torch.Tensor, pmax: torch.Tensor, kind: str = "sigmoid") -> torch.Tensor:
    """``z: (B, G) -> p: (B, G)`` in ``[pmin, pmax]``."""
    if kind == "sigmoid":
        return pmin + torch.sigmoid(z) * (pmax - pmin)
    if kind == "clamp":
        return torch.minimum(torch.maximum(z, pmin), pmax)
    raise ValueError(f"bound_repair must be one of {BOUND_REPAIRS}; got {kind!r}")
