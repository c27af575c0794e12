"""The paper's own table figures, shipped as package data so that tables can put them beside ours.

``data/paper_tables.csv`` holds one row per row of the paper's result tables (typed in from Constante, Chen,
Li, NeurIPS 2025); ``data/paper_penalty.csv`` its penalty-factor grids for DC3 and ALM and the value it
selected. Figures are kept as the strings printed in the paper ("29.6", "0.98"): no re-rounding.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

# Our table name -> the paper's table label (its LaTeX \label without "tab:").
PAPER_TABLE = {
    "table_qp_main": "dcopt_qp",
    "table_lp": "dcopt_lp",
    "table_qp_add": "dcopt_qp_add",
    "table_pretrain": "proposedinit",
}
# Hardware behind the paper's times (its appendix); quoted in the tables' footnotes.
PAPER_HARDWARE = "ground truth with Gurobi on an Apple M2 Pro CPU; networks on an NVIDIA T4 GPU"


@dataclass(frozen=True)
class PaperRow:
    """One row of a paper table; metric fields are the printed strings ('' where the paper prints none)."""

    table: str
    problem: str
    objective: str
    n: int
    m_eq: int
    m_ineq: int
    k: int
    method: str
    gap_mean: str
    gap_worst: str
    eq_viol_mean: str
    eq_viol_worst: str
    ineq_viol_mean: str
    ineq_viol_worst: str
    time_ms: str
    iterations: str

    def sizes(self) -> dict[str, int]:
        return {"n": self.n, "m_eq": self.m_eq, "m_ineq": self.m_ineq, "k": self.k}


@dataclass(frozen=True)
class PaperPenalty:
    """The penalty grid the paper tried for one (problem, method), and the value it selected."""

    problem: str
    method: str
    grid: tuple[str, ...]
    selected: str


def _read_csv(name: str) -> list[dict[str, str]]:
    import csv

    text = resources.files("hardlinear.reporting").joinpath("data", name).read_text()
    return list(csv.DictReader(text.splitlines()))


@lru_cache(maxsize=1)
def paper_rows() -> tuple[PaperRow, ...]:
    """Every row of the paper's result tables, in the paper's order."""
    out = []
    for r in _read_csv("paper_tables.csv"):
        ints = {k: int(r[k]) for k in ("n", "m_eq", "m_ineq", "k")}
        out.append(PaperRow(**{**r, **ints}))
    return tuple(out)


def paper_table(table: str) -> tuple[PaperRow, ...]:
    """Rows of one paper table by its label (``dcopt_qp``, ``dcopt_lp``, ``dcopt_qp_add``, ``proposedinit``)."""
    rows = tuple(r for r in paper_rows() if r.table == table)
    if not rows:
        known = sorted({r.table for r in paper_rows()})
        raise KeyError(f"no paper table {table!r}; known: {known}")
    return rows


def paper_block(table: str, problem: str) -> tuple[PaperRow, ...]:
    """The paper's rows of one problem in one of its tables (empty when the paper has no such block)."""
    return tuple(r for r in paper_table(table) if r.problem == problem)


def paper_sizes(problem: str) -> dict[str, int] | None:
    """The paper's n, m_eq, m_ineq, k of a problem (None when the paper does not have it)."""
    for r in paper_rows():
        if r.problem == problem:
            return r.sizes()
    return None


@lru_cache(maxsize=1)
def paper_penalties() -> tuple[PaperPenalty, ...]:
    """The paper's penalty-factor grids (its penalty table), DC-OPF first then portfolio, as printed."""
    return tuple(
        PaperPenalty(problem=r["problem"], method=r["method"], grid=tuple(r["penalty_grid"].split(";")), selected=r["selected"])
        for r in _read_csv("paper_penalty.csv")
    )
