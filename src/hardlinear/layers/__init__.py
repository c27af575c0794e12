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

# names that moved to hardlinear.rules when the offline solvers left this package
_MOVED_TO_RULES = frozenset(
    {
        "DecisionRule",
        "DecisionRuleInfeasible",
        "ProgramUnbounded",
        "RuleCost",
        "RuleSolution",
        "expected_cost",
        "max_uncertainty",
        "max_uncertainty_exact",
        "solve_decision_rule",
        "solve_robust_lp",
        "solve_robust_sdp",
    }
)


def __getattr__(name: str) -> Any:
    if name in _MOVED_TO_RULES:
        warnings.warn(
            f"hardlinear.layers.{name} moved to hardlinear.rules.{name}; import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        import hardlinear.rules

        return getattr(hardlinear.rules, name)
    raise AttributeError(f"module 'hardlinear.layers' has no attribute {name!r}")
