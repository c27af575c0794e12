"""The value a hyperparameter search minimises (``+hparams_search=...``: Hydra's Optuna sweeper, docs/own_problem.md).

Hydra's sweepers read the task function's return value as the trial's objective. A search config names the metric
(``search.metric``, a key of the run's row such as ``val/gap_mean``: the validation set, never the test set); a run
that failed, diverged, was skipped or left the metric non-finite scores ``inf``, so the search steers away from it
instead of stopping on it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def search_objective(row: Mapping[str, Any] | None, metric: str) -> float:
    """``row[metric]`` of a run that finished ``ok`` as a float; ``inf`` for anything else (no row, another status,
    a missing or non-finite value)."""
    if not row or row.get("status") != "ok":
        return math.inf
    try:
        value = float(row[metric])
    except (KeyError, TypeError, ValueError):
        return math.inf
    return value if math.isfinite(value) else math.inf


def search_metric(cfg: Mapping[str, Any]) -> str | None:
    """The metric the config's search minimises (``search.metric``), or None outside a search."""
    search = cfg.get("search") if hasattr(cfg, "get") else None
    return None if not search else str(search.get("metric", "val/gap_mean"))
