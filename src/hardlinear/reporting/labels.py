"""How a table row is named: ``RowKey`` (method, variant, pre-trained or not) and its labels.

A row of any results table is a ``RowKey``; ``method_label`` and ``problem_title`` turn keys and problems into
the text a reader sees, and ``method_order`` sorts our rows. Nothing here knows a table's layout: the paper's
tables (``paper_tables``), its figures (``figures``) and any other study's table share these names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

METHOD_LABELS = {
    "proposed": "Proposed", "proposed_refined": "Proposed refined", "optimizer": "Optimizer", "post_projection": "Post projection", "apm": "APM",
    "eapm": "EAPM", "dc3": "DC3", "ldr": "LDR", "penalty": "Penalty", "alm": "ALM",
    # the peers after the paper's methods, spelled as their authors do (a table never mixes "DC3" with "fsnet")
    "hardnet_aff": "HardNet-Aff", "pinet": "Pinet", "fsnet": "FSNet", "gauge": "Gauge", "projection_layer": "Projection layer",
    "e2elr": "E2ELR", "ldf": "LDF", "ldf_ml4opf_tests": "LDF (ML4OPF tests)", "ldf_ml4opf_defaults": "LDF (ML4OPF defaults)",
}
# Rows are ordered as here (the paper's methods in the paper's order, then the peers), then other names
# alphabetically; the paper's tables keep the paper's order.
METHOD_ORDER = tuple(METHOD_LABELS)
SOLVER_LABELS = {"gurobi": "Gurobi", "osqp": "OSQP", "highs": "HiGHS", "clarabel": "Clarabel", "scs": "SCS"}
# Methods whose rows split by pre-training (``pretrain_epochs`` 0 or not); for others the column is ignored.
PRETRAINED_METHODS = frozenset({"proposed", "proposed_refined"})
PROBLEM_TITLES = {"portfolio": "Portfolio optimization problem"}


@dataclass(frozen=True, order=True)
class RowKey:
    """What makes a table row: the method, its variant (the solver, or e.g. ``gradient=ste``), pre-training."""

    method: str
    variant: str = ""
    pretrained: bool | None = None


def method_label(key: RowKey) -> str:
    """Our label of a row: ``optimizer``/``gurobi`` -> "Optimizer (Gurobi)"; unknown names pass through."""
    parts = [SOLVER_LABELS.get(key.variant, key.variant)] if key.variant else []
    if key.pretrained is False:
        parts.append("w/o pre-training")
    base = METHOD_LABELS.get(key.method, key.method)
    return f"{base} ({', '.join(parts)})" if parts else base


def problem_title(problem: str, objective: str) -> str:
    """The paper's block title: "DC-OPF (LP) 118-bus system", "Portfolio optimization problem"."""
    if problem in PROBLEM_TITLES:
        return PROBLEM_TITLES[problem]
    m = re.fullmatch(r"pglib_opf_case(\d+)_(\w+)", problem)
    if m:
        kind = f"DC-OPF ({objective.upper()})" if objective else "DC-OPF"
        return f"{kind} {m.group(1)}-bus system (PGLib {m.group(0)})"
    m = re.fullmatch(r"dcopf_(\d+)", problem)
    if m:
        return f"DC-OPF ({objective.upper()}) {m.group(1)}-bus system" if objective else f"DC-OPF {m.group(1)}-bus system"
    return f"{problem} ({objective})" if objective else problem


def method_order(key: RowKey) -> tuple:
    """Sort key of rows of ours: ``METHOD_ORDER``, then name, variant, pre-trained before not."""
    rank = METHOD_ORDER.index(key.method) if key.method in METHOD_ORDER else len(METHOD_ORDER)
    return (rank, key.method, key.variant, key.pretrained is False)
