"""Pinet's published DC3 runs (antonioterpin/pinet @ e662b15, ``data/pinet_published.csv``) beside ours (issue 41).

Why a module of its own: the published files give the mean objective of each run and the optimum of every test
input, so the reproduction compares like with like: the gap of the mean objective against the mean optimum (what
Pinet's table of that commit reports) and the mean of per-instance gaps (what its later ``run_QP.py`` reports). Our
runs use the same 833 DC3 test inputs in the same order, so our mean objective is measured against the published
mean optimum; our per-instance gap uses our own reference (equal to Pinet's on the convex QP; SLSQP's local optima
against DC3's IPOPT ones on the nonconvex problem).
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

ACCURACY_ITERS = {"high": 100, "low": 30}  # DR iterations at test in Pinet's "high" and "low" accuracy runs
FLOATS = (
    "lr", "sigma", "omega", "objective_mean", "opt_objective_mean", "rs_gap_of_means_pct", "rs_mean_pct",
    "rs_worst_pct", "eq_max_abs_mean", "eq_max_abs_worst", "ineq_max_abs_mean", "ineq_max_abs_worst", "train_s",
    "inference_s",
)  # fmt: skip
INTS = ("n_test", "epochs", "n_iter_train", "n_iter_test", "n_iter_bwd")


def load_pinet_published(path: str | None = None) -> list[dict[str, Any]]:
    """The published runs, one per row, numbers parsed (an empty cell is ``None``: DC3's rows carry no settings)."""
    if path is None:
        text = resources.files("hardlinear.reporting").joinpath("data/pinet_published.csv").read_text()
    else:
        with open(path) as fh:
            text = fh.read()
    rows = []
    for raw in csv.DictReader(text.splitlines()):
        row: dict[str, Any] = dict(raw)
        for key in FLOATS + INTS:
            cell = raw.get(key, "")
            row[key] = None if cell in ("", None) else (int(cell) if key in INTS else float(cell))
        rows.append(row)
    return rows


def published_run(rows: Sequence[Mapping[str, Any]], problem: str, backward: str, accuracy: str) -> Mapping[str, Any]:
    """The one Pinet row of (problem, backward, accuracy); an error names what the file holds otherwise."""
    hits = [
        r
        for r in rows
        if r["method"] == "Pinet" and (r["problem"], r["backward"], r["accuracy"]) == (problem, backward, accuracy)
    ]
    if len(hits) != 1:
        have = sorted({(r["problem"], r["backward"], r["accuracy"]) for r in rows if r["method"] == "Pinet"})
        raise KeyError(f"{len(hits)} published Pinet runs for {(problem, backward, accuracy)}; the file has {have}")
    return hits[0]


@dataclass(frozen=True)
class Ours:
    """Our runs of one published setting, over seeds: each statistic as (mean, sample std or nan for one seed)."""

    seeds: int
    rs_gap_of_means_pct: tuple[float, float]
    rs_gap_of_means_by_seed: tuple[float, ...]  # in seed order: one published run is one draw of this spread
    rs_mean_pct: tuple[float, float]
    ineq_max_abs_mean: tuple[float, float]
    abs_worst: float
    train_s: tuple[float, float]


def _ms(values: Sequence[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else math.nan)


def accuracy_of(n_iter_test: int) -> str:
    """``high`` or ``low`` from the test iterations; any other count is not one of the published settings."""
    for name, iters in ACCURACY_ITERS.items():
        if int(n_iter_test) == iters:
            return name
    raise ValueError(f"n_iter_test={n_iter_test} is neither of the published settings {ACCURACY_ITERS}")


def ours_for(records: Sequence[Mapping[str, Any]], published: Mapping[str, Any]) -> Ours | None:
    """Aggregate our ok records (``load_records`` rows) with the published row's problem, backward, accuracy and
    schedule (epochs, training iterations); ``None`` when none ran."""
    runs = [
        r for r in records
        if r.get("status") == "ok" and r.get("cfg.problem.name") == published["problem"]
        and r.get("cfg.method.backward") == published["backward"]
        and int(r["cfg.method.n_iter_test"]) == published["n_iter_test"]
        and int(r["cfg.method.n_iter_train"]) == published["n_iter_train"]
        and int(r["cfg.trainer.epochs"]) == published["epochs"]
    ]  # fmt: skip
    if not runs:
        return None
    opt = published["opt_objective_mean"]
    runs = sorted(runs, key=lambda r: int(r["seed"]))
    gaps = [100 * (float(r["test/objective_mean"]) - opt) / abs(opt) for r in runs]
    return Ours(
        seeds=len(runs),
        rs_gap_of_means_pct=_ms(gaps),
        rs_gap_of_means_by_seed=tuple(gaps),
        rs_mean_pct=_ms([float(r["test/gap_mean"]) for r in runs]),
        ineq_max_abs_mean=_ms([float(r["test/ineq_max_mean"]) for r in runs]),
        abs_worst=max(float(r["test/max_abs_viol"]) for r in runs),
        train_s=_ms([float(r["train/time_s"]) for r in runs]),
    )
