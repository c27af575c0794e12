"""Online: the torch modules that run after a task network.

The blend (:class:`FeasibilityLayer`), its fused inference path (:mod:`hardlinear.layers.fused`), the equality
projection (:class:`EqualityProjector`) and the task network itself (:mod:`hardlinear.layers.network`). The
peers' correction layers (DC3, APM, HardNet, gauge, the QP projection) live in :mod:`hardlinear.layers.peers`.
Decision rules are computed offline by :mod:`hardlinear.rules`; their names are still reachable here, with a
deprecation warning that names the new path.
"""

import warnings
from typing import Any

from hardlinear.layers.equality import EqualityProjector
from hardlinear.layers.feasibility import FeasibilityLayer

__all__ = ["EqualityProjector", "FeasibilityLayer"]

def __getattr__(name: str) -> Any:
    """The names that moved to :mod:`hardlinear.rules` (its ``__all__``), with a warning naming the new path."""
    import hardlinear.rules

    if name in hardlinear.rules.__all__:
        warnings.warn(
            f"hardlinear.layers.{name} moved to hardlinear.rules.{name}; import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(hardlinear.rules, name)
    raise AttributeError(f"module 'hardlinear.layers' has no attribute {name!r}")
