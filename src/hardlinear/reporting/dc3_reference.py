"""DC3's published figures on its own benchmark, and a table that puts our runs beside them.

``data/dc3_reference.csv`` holds one row per (dataset, method) that DC3 (Donti, Rolnick, Kolter, ICLR 2021)
published, with the printed strings (no re-rounding), a ``source`` column saying where each row comes from and
a ``verified`` column: ``yes`` only where the number was read in a copy of the source itself, ``no`` where it is
quoted second-hand (the table then marks the row "unverified").
DC3's statistics are the mean objective and the means over test instances of each instance's largest absolute
equality and inequality violation; ours are computed the same way in float64 (``test/objective_mean``,
``test/eq_max_mean``, ``test/ineq_max_mean``) on DC3's own 833 test inputs. Only rows whose source could be
quoted are carried: an empty cell means "not carried", never zero.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources


@dataclass(frozen=True)
class DC3Row:
    problem: str
    num_eq: int
    num_ineq: int
    method: str
    objective: str
    eq_max: str
    ineq_max: str
    time_s: str
    verified: str
    source: str

    def __post_init__(self) -> None:
        if self.verified not in ("yes", "no"):
            raise ValueError(f"dc3_reference.csv: verified must be 'yes' or 'no'; got {self.verified!r} ({self.dataset} {self.method})")

    @property
    def dataset(self) -> str:
        """Our problem name of the dataset (``dc3_qp_eq50_ineq50``)."""
        return f"{self.problem}_eq{self.num_eq}_ineq{self.num_ineq}"


@lru_cache(maxsize=1)
def dc3_rows() -> tuple[DC3Row, ...]:
    """Every published DC3 row we carry, in file order."""
    text = resources.files("hardlinear.reporting").joinpath("data", "dc3_reference.csv").read_text()
    rows = []
    for r in csv.DictReader(text.splitlines()):
        rows.append(DC3Row(**{**r, "num_eq": int(r["num_eq"]), "num_ineq": int(r["num_ineq"])}))
    return tuple(rows)


def _fmt(x, digits: int = 4) -> str:
    try:
        value = float(x)
    except (TypeError, ValueError):
        return ""
    if math.isnan(value):
        return ""
    return f"{value:.2f}" if abs(value) >= 0.01 or value == 0 else f"{value:.1e}"


def dc3_table(df) -> str:
    """Markdown: per DC3 dataset, our rows (objective, max violations, gap, time) then DC3's published ones.

    ``df``: the results CSV as a DataFrame (rows of problems named ``dc3_*``)."""
    lines = ["| dataset | method | objective | max eq. | max ineq. | gap % | time ms | source |", "|---|---|---|---|---|---|---|---|"]
    ours = df[df["problem"].astype(str).str.startswith("dc3_")] if len(df) else df
    datasets = sorted(set(ours["problem"]) | {r.dataset for r in dc3_rows()}) if len(ours) else sorted({r.dataset for r in dc3_rows()})
    for dataset in datasets:
        for _, row in ours[ours["problem"] == dataset].iterrows() if len(ours) else []:
            variant = f" ({row['variant']})" if isinstance(row.get("variant"), str) and row.get("variant") else ""
            lines.append(
                f"| {dataset} | ours: {row['method']}{variant} seed {row['seed']} | {_fmt(row.get('test/objective_mean'))} | "
                f"{_fmt(row.get('test/eq_max_mean'))} | {_fmt(row.get('test/ineq_max_mean'))} | {_fmt(row.get('test/gap_mean'))} | "
                f"{_fmt(row.get('test/time_ms'))} | this run ({row.get('git_sha', '')}) |"
            )
        for r in dc3_rows():
            if r.dataset == dataset:
                time_ms = _fmt(1000 * float(r.time_s)) if r.time_s else ""
                source = r.source if r.verified == "yes" else f"unverified: {r.source}"
                lines.append(f"| {dataset} | DC3 paper: {r.method} | {r.objective} | {r.eq_max} | {r.ineq_max} |  | {time_ms} | {source} |")
    notes = [
        "",
        "Objective: mean over DC3's 833 test inputs; max eq./ineq.: mean over instances of each instance's largest "
        "absolute violation (DC3's statistics), in float64. Gap: against Clarabel (convex QP) or, for "
        "dc3_nonconvex, against a *local* reference (SLSQP from pinv(A) x), so it can be negative. "
        "Times are ours on a shared CPU, batch 1; DC3's are its own hardware's.",
    ]
    return "\n".join(lines + notes) + "\n"
