"""The library face: decision rules (safe networks), and the layers built on them."""

from hardlinear.layers.decision_rule import (
    DecisionRule,
    DecisionRuleInfeasible,
    max_uncertainty,
    max_uncertainty_exact,
    solve_decision_rule,
)
from hardlinear.layers.equality import EqualityProjector
from hardlinear.layers.feasibility import FeasibilityLayer
from hardlinear.layers.robust_lp import ProgramUnbounded, RuleSolution, solve_robust_lp
from hardlinear.layers.robust_sdp import solve_robust_sdp
from hardlinear.layers.rule_cost import RuleCost, expected_cost

__all__ = [
    "DecisionRule",
    "DecisionRuleInfeasible",
    "EqualityProjector",
    "FeasibilityLayer",
    "ProgramUnbounded",
    "RuleCost",
    "RuleSolution",
    "expected_cost",
    "max_uncertainty",
    "max_uncertainty_exact",
    "solve_decision_rule",
    "solve_robust_lp",
    "solve_robust_sdp",
]
