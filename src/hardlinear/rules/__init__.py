"""Offline: compute, verify and cache a decision rule (the safe network).

A rule is solved once per problem by a robust LP (dense, sparse or reduced) or the paper's SDP, verified
independently in float64, and cached by the constraints' fingerprint. Nothing here is a torch module, a method
or part of the harness: the online layers (:mod:`hardlinear.layers`) consume what this wing produces.
"""

from hardlinear.rules.cost import RuleCost, expected_cost
from hardlinear.rules.decision_rule import (
    DecisionRule,
    DecisionRuleInfeasible,
    max_uncertainty,
    max_uncertainty_exact,
    solve_decision_rule,
)
from hardlinear.rules.robust_lp import ProgramInfeasible, ProgramUnbounded, RuleSolution, solve_robust_lp
from hardlinear.rules.robust_sdp import solve_robust_sdp

__all__ = [
    "DecisionRule",
    "DecisionRuleInfeasible",
    "ProgramInfeasible",
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
