"""Figures from the results CSV: per problem, optimality gap against time, and violations per method.

Pure functions of the CSV, like the tables (same row selection: ``status == ok``, the penalty sweep left out,
one run per seed, means over seeds). Uses ``matplotlib.figure.Figure`` directly (Agg rendering), so importing
or calling this module never switches the global pyplot backend.
"""

from __future__ import annotations

import math
from pathlib import Path

from hardlinear.reporting.tables import (
    MAIN_METRICS,
    PENALTY_EXPERIMENT,
    method_label,
    method_order,
    of_key,
    one_per_seed,
    problem_title,
    summarize,
    with_keys,
)

VIOLATION_FLOOR = 1e-12
"""Violations below this (zeros included) are drawn at it: a log axis has no zero."""
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
FORMATS = ("png", "pdf")


def _series(sub) -> list[tuple[str, object]]:
    """(label, Stats) per method of a block, in the tables' method order."""
    out = []
    for key in sorted(set(sub["_key"]), key=method_order):
        runs = one_per_seed(of_key(sub, key))
        out.append((method_label(key), summarize(runs, MAIN_METRICS)))
    return out


def _save(fig, out_dir: Path, stem: str) -> list[Path]:
    paths = []
    for ext in FORMATS:
        path = out_dir / f"{stem}.{ext}"
        metadata = {"CreationDate": None} if ext == "pdf" else {"Software": None}
        fig.savefig(path, format=ext, dpi=150, bbox_inches="tight", metadata=metadata)
        paths.append(path)
    return paths


def gap_time_figure(series, title: str):
    """Scatter of mean gap (%) against mean time per instance (ms, log axis), error bars = std over seeds."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.0, 4.2))
    ax = fig.add_subplot()
    gaps = []
    for i, (label, s) in enumerate(series):
        t, g = s.mean["test/time_ms"], s.mean["test/gap_mean"]
        gaps.append(g)
        if math.isnan(t) or math.isnan(g) or t <= 0:
            continue
        xerr = s.std["test/time_ms"] if s.seeds > 1 else None
        yerr = s.std["test/gap_mean"] if s.seeds > 1 else None
        ax.errorbar(t, g, xerr=xerr, yerr=yerr, fmt=MARKERS[i % len(MARKERS)], capsize=3, label=f"{label} ({s.seeds})")
    ax.set_xscale("log")
    ax.set_xlabel("time per instance, batch 1 (ms, log scale)")
    finite = [abs(g) for g in gaps if not math.isnan(g)]
    if finite and max(finite) > 100.0:
        # A diverged soft method (gap -1e4 %) would flatten every other point onto the axis: symmetric log
        # keeps 0-1 % readable and still places the outlier where it is.
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_ylabel("optimality gap, mean over test set (%, symlog)")
    else:
        ax.set_ylabel("optimality gap, mean over test set (%)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, title="method (seeds)", title_fontsize=7, loc="best")
    return fig


def violation_figure(series, title: str):
    """Bars of mean and worst relative inequality violation per method (log axis, zeros at the floor)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(4.0, 0.7 * len(series) + 2.0), 4.2))
    ax = fig.add_subplot()
    labels = [label for label, _ in series]
    width = 0.38
    for offset, col, name in ((-width / 2, "test/ineq_viol_mean", "mean"), (width / 2, "test/ineq_viol_worst", "worst")):
        values = [s.mean[col] for _, s in series]
        heights = [max(v, VIOLATION_FLOOR) if not math.isnan(v) else VIOLATION_FLOOR for v in values]
        ax.bar([i + offset for i in range(len(series))], heights, width, label=name)
    ax.set_yscale("log")
    ax.set_ylim(bottom=VIOLATION_FLOOR / 2)
    ax.set_xticks(range(len(series)), labels, rotation=35, ha="right", fontsize=7)
    ax.set_ylabel("inequality violation (relative norm)")
    ax.set_title(title)
    ax.legend(fontsize=7)
    ax.text(0.01, 0.99, f"zeros drawn at {VIOLATION_FLOOR:g}", transform=ax.transAxes, fontsize=7, va="top")
    return fig


def make_figures(results, out_dir: str | Path, study: str | None = None, where: dict | None = None) -> list[Path]:
    """Write ``<problem>_<objective>_gap_time`` and ``..._violations`` (PNG and PDF) per problem, plus
    ``captions.md``; returns the paths written. ``results``, ``study``, ``where``: as ``make_tables``
    (only ``ok`` runs are drawn: a diverged run has no figure to show)."""
    from hardlinear.results import report_table

    df = report_table(results, study=study, where=where)
    df = with_keys(df[df["status"].isin(["ok", ""]) & (df["experiment"] != PENALTY_EXPERIMENT)])
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    captions = ["# Figures", ""]
    blocks = sorted({(str(p), str(o), str(f)) for p, o, f in zip(df["problem"], df["objective"], df["form"])})
    for problem, objective, form in blocks:
        sub = df[(df["problem"] == problem) & (df["objective"] == objective) & (df["form"] == form)]
        series = _series(sub)
        suffix = "" if form in ("", "standard") else f"_{form}"
        stem = f"{problem}_{objective}{suffix}"
        title = problem_title(problem, objective) + ("" if not suffix else f" ({form} form)")
        written += _save(gap_time_figure(series, title), out_dir, f"{stem}_gap_time")
        written += _save(violation_figure(series, title), out_dir, f"{stem}_violations")
        captions += [
            f"- `{stem}_gap_time`: {title}. Mean optimality gap against mean time per instance at batch 1 "
            "(log axis), one marker per method; error bars are standard deviations over seeds (the number of "
            "seeds is in the legend).",
            f"- `{stem}_violations`: {title}. Mean and worst relative inequality violation per method over the "
            f"test set (means over seeds), log axis; zero violations are drawn at the floor {VIOLATION_FLOOR:g}.",
        ]
    path = out_dir / "captions.md"
    path.write_text("\n".join(captions) + "\n")
    written.append(path)
    return written
