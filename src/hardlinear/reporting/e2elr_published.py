"""The E2ELR paper's published economic-dispatch gaps, to put beside runs of ``+experiment=e2elr_tpwrs2024``.

``data/e2elr_tpwrs2024_published.csv``: one row per (case, method, training) of Chen, Tanneau and Van Hentenryck's
table of gaps for dispatch without reserves (IEEE TPWRS 2024, arXiv 2304.11726v2, ``tables/gaps_all.tex``): E2ELR
self-supervised and supervised, DC3 self-supervised, on ieee300, pegase1354, rte6470 and pegase9241. The statistic is
the shifted geometric mean of the test gaps with a 1 % shift, which our records carry as ``test/gap_sgm``
(:func:`hardlinear.evaluation.metrics.shifted_geometric_mean`). Figures are kept as printed (strings), with a
``source`` column and ``verified`` (``yes`` only where read in a copy of the source itself), as
``data/dc3_reference.csv`` does.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

FILE = "e2elr_tpwrs2024_published.csv"
TRAININGS = ("self-supervised", "supervised")


@dataclass(frozen=True)
class PublishedGap:
    case: str
    problem: str
    """Our problem name of the case under problem=ed (``ed_case300_ieee``): the key to our records."""
    method: str
    training: str
    statistic: str
    gap_pct: str
    verified: str
    source: str

    def __post_init__(self) -> None:
        if self.verified not in ("yes", "no"):
            raise ValueError(f"{FILE}: verified must be 'yes' or 'no'; got {self.verified!r} ({self.case} {self.method})")
        if self.training not in TRAININGS:
            raise ValueError(f"{FILE}: training must be one of {TRAININGS}; got {self.training!r} ({self.case} {self.method})")
        float(self.gap_pct)  # a number as printed, or the file is broken


@lru_cache(maxsize=1)
def published_gaps() -> tuple[PublishedGap, ...]:
    """Every published row we carry, in file order."""
    text = resources.files("hardlinear.reporting").joinpath("data", FILE).read_text()
    return tuple(PublishedGap(**row) for row in csv.DictReader(text.splitlines()))
