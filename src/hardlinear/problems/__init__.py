"""Problems: DC-OPF and economic dispatch on PGLib cases, the bond portfolio, DC3's QPs and any LP/QP from arrays, behind one
batched interface."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from hardlinear.problems.base import Objective, Problem
from hardlinear.problems.dc3 import DC3QP, DC3Nonconvex
from hardlinear.problems.dcopf import DCOPF, PAPER_UNCERTAINTY, available_cases
from hardlinear.problems.ed import EconomicDispatch
from hardlinear.problems.linear import LinearProblem
from hardlinear.problems.portfolio import Portfolio

# The paper's problems by short name: (class, fixed arguments).
PAPER_PROBLEMS: dict[str, tuple[type[Problem], dict[str, Any]]] = {
    "dcopf_14": (DCOPF, {"case": "pglib_opf_case14_ieee"}),
    "dcopf_30": (DCOPF, {"case": "pglib_opf_case30_ieee"}),
    "dcopf_57": (DCOPF, {"case": "pglib_opf_case57_ieee"}),
    "dcopf_118": (DCOPF, {"case": "pglib_opf_case118_ieee"}),
    "dcopf_200": (DCOPF, {"case": "pglib_opf_case200_activ"}),
    "dcopf": (DCOPF, {}),
    "portfolio": (Portfolio, {}),
}

# Every problem by short name: the paper's, PGLearn's economic dispatch, DC3's benchmark QPs, and a problem from a
# file of arrays.
PROBLEMS: dict[str, tuple[type[Problem], dict[str, Any]]] = {
    **PAPER_PROBLEMS,
    "ed": (EconomicDispatch, {}),
    "dc3_qp": (DC3QP, {}),
    "dc3_nonconvex": (DC3Nonconvex, {}),
    "linear": (LinearProblem, {}),
}

# n, m_eq, m_ineq, k as the paper's tables give them (standard form).
PAPER_SIZES = {
    "dcopf_14": (123, 38, 84, 14),
    "dcopf_30": (245, 76, 168, 30),
    "dcopf_57": (468, 141, 324, 57),
    "dcopf_118": (1126, 340, 768, 118),
    "dcopf_200": (1527, 452, 1044, 200),
    "portfolio": (16, 2, 9, 10),
}


def build_problem(name: str, cache_dir: str | None = None, stored: dict[str, Any] | None = None, **options: Any) -> Problem:
    """Build a problem by name: ``build_problem("dcopf_118", objective="qp")``,
    ``build_problem("dcopf", case="pglib_opf_case300_ieee", uncertainty=0.1)``. ``cache_dir``: where a problem
    that keeps a costly part of its build on disk (the dispatch's PTDF) keeps it; the others ignore it.
    ``stored``: what the problem's ``rebuild_arrays()`` returned (a checkpoint keeps it), so that a grid is rebuilt
    from it instead of from its PGLib case; ``ValueError`` for data this problem does not take."""
    if name not in PROBLEMS:
        raise ValueError(f"unknown problem {name!r}; choose one of {sorted(PROBLEMS)}")
    cls, fixed = PROBLEMS[name]
    clash = set(fixed) & set(options)
    if clash:
        raise ValueError(f"{name} fixes {sorted(clash)}; use problem 'dcopf' with case=... to choose another case")
    kwargs = {**fixed, **options, **_stored_options(cls, stored)}
    if cache_dir is not None and "cache_dir" in inspect.signature(cls).parameters:
        kwargs["cache_dir"] = str(cache_dir)
    if cls is DCOPF:
        kwargs.setdefault("name", name if name != "dcopf" else kwargs.get("case", "dcopf"))
    return cls(**kwargs)


def _stored_options(cls: type[Problem], stored: dict[str, Any] | None) -> dict[str, Any]:
    """The constructor arguments of ``stored`` (a grid's ``rebuild_arrays()``): ``network=`` as a checked
    :class:`~hardlinear.problems.dcopf.Network`, ``matpower_c2=`` as an array."""
    if not stored:
        return {}
    from hardlinear.problems.dcopf import network_from_arrays

    accepted = set(inspect.signature(cls).parameters)
    unknown = sorted(set(stored) - (accepted & {"network", "matpower_c2"}))
    if unknown:
        raise ValueError(f"{cls.__name__} takes no stored {', '.join(unknown)}")
    out: dict[str, Any] = {"network": network_from_arrays(dict(stored["network"]))} if "network" in stored else {}
    if stored.get("matpower_c2") is not None:
        out["matpower_c2"] = np.asarray(stored["matpower_c2"], dtype=np.float64)
    return out


def planned_sizes(name: str, **options: Any) -> dict[str, int | str] | None:
    """``build_problem(name, **options)``'s ``name`` and ``sizes()`` without building, for problems that can say them
    cheaply (their class's ``planned_sizes``); None for the others, and for an unknown name (``build_problem``
    reports it)."""
    if name not in PROBLEMS:
        return None
    cls, fixed = PROBLEMS[name]
    planner = getattr(cls, "planned_sizes", None)
    return None if planner is None else planner(**{**fixed, **options})


__all__ = ["DC3QP", "DCOPF", "EconomicDispatch", "PAPER_PROBLEMS", "PROBLEMS", "DC3Nonconvex", "LinearProblem", "PAPER_SIZES", "PAPER_UNCERTAINTY", "Objective", "Portfolio", "Problem", "available_cases", "build_problem", "planned_sizes"]
