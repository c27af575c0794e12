"""Figures of one study: per problem, gap against time, violations per method, and training curves.

The plotting functions take a ``pandas.DataFrame`` of runs already selected for one study (one row per run;
columns ``problem``, ``objective``, ``form``, ``method``, ``variant``, ``seed``, ``run_dir``, ``study``,
``trainer`` and the ``test/...`` metrics), so they work on any loader that gives those columns;
:func:`runs_frame` builds it from the results loader (records and legacy CSVs). Row selection is the tables' (``status == ok``, the penalty
sweep left out, one run per seed, means over seeds).

What a reviewer sees on every figure: the study and the trainer in the title; the paper's published figures
as hollow grey reference markers where its tables have the row (its times are on other hardware: a T4 GPU and
an M2 Pro, see the captions); violations on a symmetric-log axis on which a zero is drawn at zero (labelled
``0``), never as a bar at a floor; a method with a single point is drawn as a labelled marker, and a panel
with nothing to draw is left out. Training curves read each run's ``epochs.csv`` (written by the CSV logger in
its run directory): the validation gap and inequality violation per epoch, mean over seeds as a line and the
seeds' min-max as a band.

Uses ``matplotlib.figure.Figure`` directly (Agg rendering), so importing or calling this module never switches
the global pyplot backend.
"""

from __future__ import annotations

import math
from pathlib import Path

from hardlinear.reporting import paper_reference as paper
from hardlinear.reporting.labels import method_label, method_order, problem_title
from hardlinear.reporting.paper_tables import MAIN_METRICS, PAPER_LABELS, PENALTY_EXPERIMENT
from hardlinear.reporting.stats import (
    differing_keys,
    of_key,
    one_per_seed,
    row_label,
    rows_by_setting,
    summarize,
    with_keys,
)
from hardlinear.reporting.study_table import FEASIBILITY_TOL
from hardlinear.runtime.names import inside, printable, slug

VIOLATION_LINTHRESH = 1e-10
"""Symmetric-log axes of violations are linear below this: a zero sits at zero, float64 rounding (~1e-16)
just above it, and anything a reader should worry about on the log part."""
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")


def color(i: int):
    """The i-th method's colour: tab10's ten, then tab20's lighter shades (no two methods of a figure share one
    below twenty)."""
    from matplotlib import colormaps

    if i < 10:
        return colormaps["tab10"](i)
    return colormaps["tab20"]((2 * (i - 10) + 1) % 20)
FORMATS = ("png", "pdf")
NOT_RECORDED = "not recorded"


# --- the runs of a study ------------------------------------------------------------------------------------
TRAINER_COLUMN = "cfg.trainer.name"


def runs_frame(results, study: str | None = None, where: dict | None = None):
    """The runs table the figure functions take, from the loader (``results.report_table``: results roots or
    a loaded table, a study, filters on any config key): ``status == ok`` rows, the penalty sweep left out,
    ``run_dir`` the folder of each record (its ``epochs.csv``), plus ``trainer`` (the record's ``cfg.trainer.name``; ``not recorded`` for legacy CSV rows, whose config
    is not stored)."""
    from hardlinear.harness.results import RECORD_FILE, report_table

    df = report_table(results, study=study, where=where)
    df = df[df["status"].isin(["ok", ""]) & (df["experiment"] != PENALTY_EXPERIMENT)].copy()
    trainers = df[TRAINER_COLUMN] if TRAINER_COLUMN in df.columns else [None] * len(df)
    if "record" in df.columns:  # a record's own folder wins over the path it was written under (moved results)
        df["run_dir"] = [str(Path(r).parent) if isinstance(r, str) and r.endswith(RECORD_FILE) else d
                         for r, d in zip(df["record"], df["run_dir"])]
    df["trainer"] = [NOT_RECORDED if t is None or (isinstance(t, float) and math.isnan(t)) or t == "" else str(t)
                     for t in trainers]
    return df


def _subtitle(runs, study: str) -> str:
    """``study: s  |  trainer: default, 100 epochs``: the trainer's name and the schedule the runs had (their
    ``trainer.epochs`` and budget), never the name alone (``default`` with ``trainer.epochs=100`` is not the paper's
    schedule)."""
    trainers = sorted({str(t) for t in runs["trainer"]}) if "trainer" in runs.columns else [NOT_RECORDED]
    differing = differing_keys(runs) if len(runs) else []
    return (f"study: {study}  |  trainer: {', '.join(trainers + _schedule(runs))}"
            + (f"\nrows differ in {', '.join(differing)} (each label says its value)" if differing else ""))


def _schedule(runs) -> list[str]:
    """``["100 epochs"]``, ``["4-300 epochs", "budget 120 s (2 of 5 runs)"]``: what the runs' configs say."""
    def values(column: str) -> list[float]:
        if column not in runs.columns:
            return []
        return [float(v) for v in runs[column] if v is not None and v != "" and not (isinstance(v, float) and math.isnan(v))]

    out = []
    epochs = values("cfg.trainer.epochs")
    if epochs:
        low, high = min(epochs), max(epochs)
        out.append(f"{low:g} epochs" if low == high else f"{low:g}-{high:g} epochs")
    budgets = values("cfg.trainer.time_budget_s")
    if budgets:
        text = "budget " + "/".join(f"{b:g}" for b in sorted(set(budgets))) + " s"
        out.append(text if len(budgets) == len(runs) else f"{text} ({len(budgets)} of {len(runs)} runs)")
    return out


def _contents(runs) -> list[str]:
    """Each row's problem content (the first 12 hex digits of its file's sha256; "" for a problem not from a file)."""
    if "problem_sha256" not in runs.columns:
        return [""] * len(runs)
    return ["" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v) for v in runs["problem_sha256"]]


def _blocks(runs) -> list[tuple[str, str, str, str]]:
    """(problem, objective, form, content) of each figure: two files under one name are two figures."""
    return sorted(set(zip(runs["problem"].astype(str), runs["objective"].astype(str), runs["form"].astype(str), _contents(runs))))


def _block(runs, problem: str, objective: str, form: str, content: str = ""):
    same = runs["problem"].index.isin(runs.index[[c == content for c in _contents(runs)]])
    return runs[(runs["problem"] == problem) & (runs["objective"] == objective) & (runs["form"] == form) & same]


def _file_names(sub) -> str:
    col = "cfg.problem.path"
    if col not in sub.columns:
        return "?"
    return ", ".join(sorted({Path(str(v)).name for v in sub[col] if isinstance(v, str) and v})) or "?"


def _series(sub) -> list[tuple[str, object]]:
    """(label, Stats) per row of a block (``stats.rows_by_setting``: one per method and differing setting, the
    setting in the label), in the tables' method order."""
    return [(row_label(key, setting), summarize(one_per_seed(runs), MAIN_METRICS)) for key, setting, runs in rows_by_setting(sub)]


def _method_of(label: str) -> str:
    """The method's label of a row's label (``"Proposed [trainer.lr=0.001]"`` -> ``"Proposed"``): what the paper's
    reference points are keyed by."""
    return label.partition(" [")[0]


def paper_points(problem: str, objective: str) -> dict[str, dict[str, float]]:
    """The paper's figures for a block, by our method label: ``gap_mean``, ``time_ms``, ``ineq_viol_mean``
    (NaN where it prints none); the first table that has the row wins. A problem the paper has under one
    objective only (the portfolio: printed as QP, its published data linear) takes that objective's rows, as
    the tables do."""
    out: dict[str, dict[str, float]] = {}
    rows = [r for r in paper.paper_rows() if r.problem == problem and r.table != "proposedinit"]
    if len({r.objective for r in rows}) > 1:
        rows = [r for r in rows if r.objective == objective]
    for row in rows:
        key = PAPER_LABELS.get(row.method)
        label = method_label(key) if key is not None else row.method
        if label not in out:
            out[label] = {
                name: _float(getattr(row, name)) for name in ("gap_mean", "time_ms", "ineq_viol_mean", "ineq_viol_worst")
            }
    return out


def _float(text: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def _save(fig, out_dir: Path, stem: str, formats: tuple[str, ...] = FORMATS) -> list[Path]:
    paths = []
    for ext in formats:
        path = inside(out_dir, f"{slug(stem)}.{ext}")  # a record's fields never choose where a file goes
        # no date and no version in the file: a figure regenerated from the same records is the same bytes
        metadata = {"CreationDate": None, "Producer": None, "Creator": None} if ext == "pdf" else {"Software": None}
        fig.savefig(path, format=ext, dpi=150, bbox_inches="tight", metadata=metadata)
        paths.append(path)
    return paths


def _titles(fig, ax, title: str, subtitle: str) -> None:
    fig.suptitle(title, fontsize=10)
    ax.set_title(subtitle, fontsize=8)


# --- figures ------------------------------------------------------------------------------------------------
def gap_time_figure(series, title: str, subtitle: str = "", reference: dict[str, dict[str, float]] | None = None,
                    absent: list[str] | None = None):
    """Mean gap (%) against mean time per instance (ms, log axis), error bars = std over seeds; the paper's
    points, where it has them, as hollow markers of the same method's colour and shape (methods only the paper
    has get their own entry); ``absent`` (``"HardNet-Aff: not applicable"``): the study's methods without an ok run
    here, named under the legend so that none disappears unsaid. Returns None when no method of ours has a point."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    points = [(label, s) for label, s in series if s.mean["test/time_ms"] > 0 and not math.isnan(s.mean["test/gap_mean"])]
    if not points:
        return None
    refs = {label: r for label, r in (reference or {}).items() if r["time_ms"] > 0 and not math.isnan(r["gap_mean"])}
    ours = [label for label, _ in points]
    index = {label: i for i, label in enumerate(ours)}
    for label in sorted(refs):  # the paper's point takes the colour of our row of its method (the first, if several)
        index.setdefault(label, next((index[o] for o in ours if _method_of(o) == label), len(index)))
    mine = {_method_of(o) for o in ours}
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    gaps = []
    flagged = False
    for label, s in points:
        i, t, g = index[label], s.mean["test/time_ms"], s.mean["test/gap_mean"]
        gaps.append(g)
        xerr = s.std["test/time_ms"] if s.seeds > 1 else None
        yerr = s.std["test/gap_mean"] if s.seeds > 1 else None
        worst = worst_violation(s)
        bad = worst > FEASIBILITY_TOL
        ax.errorbar(t, g, xerr=xerr, yerr=yerr, fmt=MARKERS[i % len(MARKERS)], color=color(i), capsize=3, zorder=3,
                    label=_wrap(f"{label} ({s.seeds})" + (f" INFEASIBLE, worst viol. {worst:.1e}" if bad else "")))
        if bad:  # a negative gap of an infeasible method is not a win: ringed, its own marker still seen inside
            flagged = True
            ax.plot(t, g, "o", ls="", ms=RING_MS, mfc="none", mec="red", mew=1.8, zorder=5)
        if len(points) == 1:  # one dot alone: say what it is beside it
            ax.annotate(f"{label}: {g:.2f} %", (t, g), textcoords="offset points", xytext=(6, 6), fontsize=8)
    for label, ref in refs.items():
        i = index[label]
        gaps.append(ref["gap_mean"])
        ax.plot(ref["time_ms"], ref["gap_mean"], MARKERS[i % len(MARKERS)], ls="", mfc="none", mec=color(i), ms=9,
                mew=1.4, label=None if label in mine else _wrap(f"{label} (paper only)"))
    ax.set_xscale("log")
    ax.set_xlabel("time per instance, batch 1 (ms, log scale)")
    if gaps and max(abs(g) for g in gaps) > 100.0:
        # A diverged soft method (gap -1e4 %) would flatten every other point onto the axis.
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_ylabel("optimality gap, mean over test set (%, symlog)")
    else:
        ax.set_ylabel("optimality gap, mean over test set (%)")
    _titles(fig, ax, title, subtitle)
    ax.grid(True, which="both", alpha=0.3)
    ax.margins(x=MARGIN, y=MARGIN)  # room for a ring at the data's edge: no marker is clipped by the axes
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda j: " ".join(labels[j].split()).endswith("(paper only)"))  # ours first
    handles, labels = [handles[j] for j in order], [labels[j] for j in order]
    if refs:
        handles.append(Line2D([], [], marker="o", ls="", mfc="none", mec="0.35", ms=8))
        labels.append("hollow: the paper (other hardware)")
    if flagged:
        handles.append(Line2D([], [], marker="o", ls="", mfc="none", mec="red", ms=11, mew=1.8))
        labels.append(_wrap(f"red ring: infeasible (worst violation > {FEASIBILITY_TOL:g}); its gap is no win"))
    for text in absent or []:
        handles.append(Line2D([], [], ls=""))
        labels.append(_wrap(f"not drawn: {text}"))
    ax.legend(handles, labels, fontsize=7, title="method (seeds)", title_fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


RING_MS = 15
"""The red ring drawn over an infeasible method's own marker (7 pt): it stays that method's colour and shape."""
MARGIN = 0.12
"""The gap-time axes' margins (share of the data range): more than a ring's radius at the figure's size."""
LEGEND_CHARS = 60
"""Legend entries wrap at this width: a long label or reason made the figure twice as wide as its axes."""


TICK_CHARS = 30
"""Bar labels wrap at this width: a long variant made the violations figure three times as tall as its bars."""


def _wrap(text: str, width: int = LEGEND_CHARS) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width, break_long_words=False, subsequent_indent="  ")) or text


def worst_violation(stats) -> float:
    """The larger of a row's worst equality and inequality violations, over every test instance of every seed (the
    study table's "(worst)", not a mean of the seeds' worsts); 0 when not recorded."""
    values = [stats.worst.get(c, math.nan) for c in ("test/eq_viol_worst", "test/ineq_viol_worst")]
    values = [v for v in values if not math.isnan(v)]
    return max(values) if values else 0.0


def gap_violation_figure(runs, title: str, subtitle: str = ""):
    """The field's view: each seed's mean gap (%) against its worst constraint violation (the larger of equality
    and inequality, relative norm, symmetric-log axis, zero drawn at zero), one marker per method and seed; the
    region beyond ``FEASIBILITY_TOL`` is shaded: a point there violates the constraints, whatever its gap.
    ``runs``: one study's ok rows of one problem. None when no run has the metrics."""
    from matplotlib.figure import Figure

    rows_of = rows_by_setting(runs) if len(runs) else []
    if not rows_of:
        return None
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    drawn = xmax = 0
    for i, (key, setting, rows) in enumerate(rows_of):
        rows = one_per_seed(rows)
        xs, ys = [], []
        for row in rows.to_dict("records"):
            viol = [float(row.get(c, math.nan)) for c in ("test/eq_viol_worst", "test/ineq_viol_worst")]
            viol = [v for v in viol if not math.isnan(v)]
            gap = float(row.get("test/gap_mean", math.nan))
            if viol and not math.isnan(gap):
                xs.append(max(viol))
                ys.append(gap)
        if xs:
            drawn += 1
            xmax = max(xmax, *xs)
            ax.plot(xs, ys, MARKERS[i % len(MARKERS)], ls="", color=color(i), label=_wrap(f"{row_label(key, setting)} ({len(xs)})"))
    if not drawn:
        return None
    ax.set_xscale("symlog", linthresh=VIOLATION_LINTHRESH, linscale=0.6)
    ax.set_xlim(left=-0.25 * VIOLATION_LINTHRESH, right=max(10 * xmax, 10 * FEASIBILITY_TOL))
    ax.axvspan(FEASIBILITY_TOL, ax.get_xlim()[1], color="red", alpha=0.08, lw=0)
    ax.axvline(FEASIBILITY_TOL, color="red", lw=0.8, ls="--")
    ax.text(FEASIBILITY_TOL, 1.0, f" infeasible (> {FEASIBILITY_TOL:g})", transform=ax.get_xaxis_transform(), color="red",
            fontsize=7, va="top")
    ax.set_xlabel(f"worst constraint violation, relative norm (symlog; 0 at zero, linear below {VIOLATION_LINTHRESH:g})")
    ax.set_ylabel("relative suboptimality: mean gap over the test set (%)")
    _titles(fig, ax, title, subtitle)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, title="method (seeds)", title_fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def _symlog_violation_axis(ax, label: str) -> None:
    ax.set_yscale("symlog", linthresh=VIOLATION_LINTHRESH, linscale=0.6)
    ax.set_ylim(bottom=-0.25 * VIOLATION_LINTHRESH)  # a hair below 0: a line at zero stays off the spine
    ax.set_ylabel(f"{label} (symlog)")
    ax.text(0.01, 0.99, f"0 is drawn at zero; linear below {VIOLATION_LINTHRESH:g}", transform=ax.transAxes,
            fontsize=6, va="top", color="0.3")


def violation_figure(series, title: str, subtitle: str = "", reference: dict[str, dict[str, float]] | None = None):
    """Bars of mean and worst relative violation per method, equalities (left) and inequalities (right), on
    symmetric-log axes: a zero is a bar of height zero labelled ``0``. Mean: over seeds of each seed's mean; worst:
    over every test instance of every seed (the table's "(worst)"). The paper's inequality mean and worst, where it
    prints them, as grey ticks. None when no method has a violation recorded."""
    from matplotlib.figure import Figure

    cols = ("test/eq_viol_mean", "test/eq_viol_worst", "test/ineq_viol_mean", "test/ineq_viol_worst")
    rows = [(label, s) for label, s in series if not all(math.isnan(s.mean.get(c, math.nan)) for c in cols)]
    if not rows:
        return None
    fig = Figure(figsize=(2 * max(3.6, 0.7 * len(rows) + 1.6), 4.4))
    axes = fig.subplots(1, 2)
    width = 0.38
    for ax, kind, name in zip(axes, ("eq", "ineq"), ("equality", "inequality")):
        for offset, which in ((-width / 2, "mean"), (width / 2, "worst")):
            col = f"test/{kind}_viol_{which}"
            xs = [i + offset for i in range(len(rows))]
            values = [s.mean.get(col, math.nan) if which == "mean" else s.worst.get(col, math.nan) for _, s in rows]
            ax.bar(xs, [0.0 if math.isnan(v) else v for v in values], width, label=which, color="C0" if which == "mean" else "C1")
            for x, v in zip(xs, values):
                if math.isnan(v) or v < VIOLATION_LINTHRESH:  # no visible bar: say what is there
                    text = "n/a" if math.isnan(v) else ("0" if v == 0.0 else f"{v:.0e}")
                    ax.annotate(text, (x, 0.0), textcoords="offset points", xytext=(0, 2), ha="center", fontsize=6,
                                rotation=0 if len(text) < 3 else 90, va="bottom")
            for x, (label, _) in zip(xs, rows):
                ref = (reference or {}).get(_method_of(label), {}).get(f"{kind}_viol_{which}", math.nan) if kind == "ineq" else math.nan
                if not math.isnan(ref):
                    ax.plot([x - width / 2, x + width / 2], [ref, ref], color="0.3", lw=1.5,
                            label="paper" if "paper" not in ax.get_legend_handles_labels()[1] else None)
        _symlog_violation_axis(ax, f"{name} violation (relative norm)")
        ax.set_xticks(range(len(rows)), [_wrap(label, TICK_CHARS) for label, _ in rows], rotation=35, ha="right", fontsize=7)
        ax.set_title(name, fontsize=8)
        ax.grid(True, axis="y", which="both", alpha=0.3)
    fig.suptitle(f"{title}\n{subtitle}" if subtitle else title, fontsize=9)
    fig.subplots_adjust(wspace=0.38, top=0.85)  # room for the right panel's axis label
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(0.91, 0.85))
    return fig


EPOCH_LOG_BYTES = 32 * 2**20
"""Largest ``epochs.csv`` read (a 1,000-epoch log is under 1 MB)."""


def read_epoch_log(run_dir: str | Path):
    """A run's ``epochs.csv`` as a DataFrame, or None when it is absent or unreadable, or not a regular file of at
    most :data:`EPOCH_LOG_BYTES` inside the run directory (a FIFO, ``/dev/zero`` or a link out: never waited on)."""
    import io

    import pandas as pd

    from hardlinear.runtime.safe_read import read_regular

    path = Path(run_dir) / "epochs.csv"
    try:
        return pd.read_csv(io.BytesIO(read_regular(path, EPOCH_LOG_BYTES, folder=run_dir)))
    except (OSError, ValueError):
        return None


CURVES = (("val/gap_mean", "validation gap, mean (%)"), ("val/ineq_viol_mean", "validation ineq. violation, mean"))


def training_curves_figure(runs, title: str, subtitle: str = "", reference: dict[str, dict[str, float]] | None = None):
    """Validation gap and inequality violation per epoch, one line per method (mean over seeds) with the
    seeds' min-max as a band, from each run's ``epochs.csv``; the paper's final test gap as a grey marker at
    the last epoch. Returns ``(figure or None, run directories not found)``; methods with nothing trained (a run
    directory without ``epochs.csv``) have no curve, and a block with no curve gives no figure."""
    import numpy as np
    import pandas as pd
    from matplotlib.figure import Figure

    curves, missing = [], []
    for key, setting, rows in rows_by_setting(runs) if len(runs) else []:
        logs = []
        for record in one_per_seed(rows).to_dict("records"):
            log = read_epoch_log(record["run_dir"])
            if log is not None and "epoch" in log.columns and any(c in log.columns for c, _ in CURVES):
                logs.append(log)
            elif not Path(record["run_dir"]).is_dir():  # a run dir without a log: nothing was trained (LDR)
                missing.append(str(record["run_dir"]))
        if logs:
            curves.append((row_label(key, setting), logs))
    if not curves:
        return None, missing
    fig = Figure(figsize=(11.0, 4.2))
    axes = fig.subplots(1, 2)
    diamonds = False
    for ax, (col, label) in zip(axes, CURVES):
        drawn = False
        for i, (name, logs) in enumerate(curves):
            frames = [lg[["epoch", col]].dropna() for lg in logs if col in lg.columns]
            frames = [f for f in frames if len(f)]
            if not frames:
                continue
            table = pd.concat([f.set_index("epoch")[col].rename(j) for j, f in enumerate(frames)], axis=1).sort_index()
            epochs = table.index.to_numpy()
            values = table.to_numpy(dtype=float)
            mean = np.nanmean(values, axis=1)
            shade = color(i)
            tag = _wrap(f"{name} ({len(frames)} seed{'s' if len(frames) > 1 else ''})")
            if len(epochs) == 1:  # one validation point: a labelled marker, not a lone dot
                ax.plot(epochs, mean, MARKERS[i % len(MARKERS)], color=shade, label=tag)
                ax.annotate(f"{mean[0]:.3g}", (epochs[0], mean[0]), textcoords="offset points", xytext=(5, 5), fontsize=7)
            else:
                ax.plot(epochs, mean, color=shade, lw=1.4, label=tag)
                if len(frames) > 1:
                    ax.fill_between(epochs, np.nanmin(values, axis=1), np.nanmax(values, axis=1), color=shade, alpha=0.2, lw=0)
            ref = (reference or {}).get(_method_of(name), {}).get("gap_mean" if col == "val/gap_mean" else "ineq_viol_mean", math.nan)
            if not math.isnan(ref):
                ax.plot(epochs[-1], ref, "D", mfc="none", mec=shade, ms=7)
                diamonds = True
            drawn = True
        if not drawn:
            ax.set_visible(False)
            continue
        ax.set_xlabel("epoch")
        if col == "val/ineq_viol_mean":
            _symlog_violation_axis(ax, label)
        else:
            finite = [v for _, logs in curves for lg in logs if col in lg.columns for v in lg[col].dropna()]
            if finite and max(abs(v) for v in finite) > 100.0:
                ax.set_yscale("symlog", linthresh=1.0)
                label = label.replace("(%)", "(%, symlog)")
            ax.set_ylabel(label)
        starts = [int(lg.loc[lg["phase"] == "train", "epoch"].min()) for _, logs in curves for lg in logs
                  if "phase" in lg.columns and (lg["phase"] == "pretrain").any() and (lg["phase"] == "train").any()]
        if starts:  # where pre-training (MSE to the rule) hands over to the objective
            ax.axvline(min(starts) - 0.5, color="0.5", ls=":", lw=1)
            ax.annotate("pre-training ends", (min(starts) - 0.5, 0.5), xycoords=("data", "axes fraction"),
                        xytext=(-3, 0), textcoords="offset points", ha="right", va="center", rotation=90,
                        fontsize=6, color="0.4")
        ax.grid(True, which="both", alpha=0.3)
    # one legend beside both panels: inside an axis ("best") it covered curves
    visible = [ax for ax in axes if ax.get_visible()] or list(axes)
    handles, labels = visible[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(0.91, 0.88), title="method", title_fontsize=7)
    fig.suptitle(f"{title}: training curves\n{subtitle}" + ("  |  hollow diamonds: paper's final test figure" if diamonds else ""), fontsize=9)
    return fig, missing


# --- one study, every figure --------------------------------------------------------------------------------
def not_drawn(others, sub, problem: str, objective: str, form: str, content: str) -> list[str]:
    """``["HardNet-Aff: not applicable (HardNet-Aff needs ...)"]``: the methods of a block with runs in ``others`` (the
    study's rows that are not ``ok``) and no ok run in ``sub`` (the block's drawn runs), each with its status and
    reason, so that a method does not vanish from a figure unsaid."""
    if others is None or not len(others):
        return []
    mine = _block(others, problem, objective, form, content) if "form" in others.columns else others.iloc[0:0]
    drawn = set(with_keys(sub)["_key"]) if len(sub) else set()
    out = []
    rows = with_keys(mine)
    for key in sorted(set(rows["_key"]) - drawn, key=method_order):
        last = of_key(rows, key).iloc[-1]
        status = str(last.get("status", "")).replace("_", " ")
        reason = str(last.get("reason", "") or "").strip()
        out.append(f"{method_label(key)}: {status}" + (f" ({reason[:80]}{'...' if len(reason) > 80 else ''})" if reason else ""))
    return out


def study_figures(runs, out_dir: str | Path, study: str, formats: tuple[str, ...] = FORMATS,
                  others=None) -> tuple[list[Path], list[str]]:
    """Every figure of one study's runs into ``out_dir`` (each in ``formats``); returns (paths written, caption
    lines). ``others``: the study's rows that are not ``ok`` (named on the gap-time figure and in its caption)."""
    from matplotlib import rc_context

    from hardlinear.reporting.stats import MixedSettings

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    captions: list[str] = []
    with rc_context({"text.parse_math": False}):  # a method named `$\\frac{$` is text, not a formula to parse
        for block in _blocks(runs):
            try:
                paths, lines = _block_figures(runs, block, out_dir, study, formats, others)
            except MixedSettings:
                raise
            except (ValueError, OSError, RuntimeError) as err:  # one bad block is reported; the others are drawn
                problem, objective, form, _ = block
                lines = [f"- {printable(problem)} {printable(objective)} {printable(form)}: not drawn "
                         f"({type(err).__name__}: {printable(err)})"]
                paths = []
            written += paths
            captions += lines
    return written, captions


def _block_figures(runs, block: tuple[str, str, str, str], out_dir: Path, study: str, formats: tuple[str, ...],
                   others) -> tuple[list[Path], list[str]]:
    """The figures of one (problem, objective, form, content) block and their caption lines."""
    problem, objective, form, content = block
    written: list[Path] = []
    captions: list[str] = []
    sub = _block(runs, problem, objective, form, content)
    series = _series(sub)
    absent = not_drawn(others, sub, problem, objective, form, content)
    suffix = "" if form in ("", "standard") else f"_{form}"
    stem = slug(f"{problem}_{objective}{suffix}" + (f"_{content}" if content else ""))
    title = problem_title(problem, objective) + ("" if not suffix else f" ({form} form)")
    if content:  # the file's name and content: two files under one name never share a figure
        title += f" [{_file_names(sub)}, sha256 {content}]"
    subtitle = _subtitle(sub, study)
    reference = paper_points(problem, objective)
    has_points = any(r["time_ms"] > 0 and not math.isnan(r["gap_mean"]) for r in reference.values())
    has_ticks = any(not math.isnan(r.get(k, math.nan)) for r in reference.values() for k in ("ineq_viol_mean", "ineq_viol_worst"))
    fig = gap_time_figure(series, title, subtitle, reference, absent)
    if fig is not None:
        written += _save(fig, out_dir, f"{stem}_gap_time", formats)
        captions.append(
            f"- `{stem}_gap_time`: {title} ({subtitle}). Mean optimality gap against mean time per instance at "
            "batch 1 (log axis), one marker per method; error bars are standard deviations over seeds (their "
            "number in the legend)."
            + (" Hollow markers: the paper's figures (its times are on a T4 GPU and an M2 Pro CPU, not comparable "
               "with ours)." if has_points else "")
            + " A red ring (over the method's own marker) and INFEASIBLE in the legend: the method's worst violation (over every test instance of "
            f"every seed) exceeds {FEASIBILITY_TOL:g}, so a low or negative gap is not a win."
            + (f" Not drawn (no ok run): {'; '.join(absent)}." if absent else "")
        )
    fig = gap_violation_figure(sub, title, subtitle)
    if fig is not None:
        written += _save(fig, out_dir, f"{stem}_gap_violation", formats)
        captions.append(
            f"- `{stem}_gap_violation`: {title} ({subtitle}). Each seed's mean optimality gap against its worst "
            f"constraint violation (equality or inequality, relative norm; symmetric-log axis with zero at zero), "
            f"one marker per method and seed. The shaded region beyond {FEASIBILITY_TOL:g} is infeasible: a point "
            "there violates the constraints, so its gap (negative ones included) is not comparable."
        )
    fig = violation_figure(series, title, subtitle, reference)
    if fig is not None:
        written += _save(fig, out_dir, f"{stem}_violations", formats)
        captions.append(
            f"- `{stem}_violations`: {title} ({subtitle}). Mean and worst relative equality (left) and inequality "
            "(right) violation per method over the test set (mean: over seeds; worst: over every test instance of "
            f"every seed, as the table) on symmetric-log axes, linear below {VIOLATION_LINTHRESH:g}: a zero is drawn "
            "at zero and labelled 0." + (" Grey ticks: the paper's figures." if has_ticks else "")
        )
    fig, missing = training_curves_figure(sub, title, subtitle, reference)
    if fig is not None:
        written += _save(fig, out_dir, f"{stem}_training", formats)
        captions.append(
            f"- `{stem}_training`: {title} ({subtitle}). Validation gap and inequality violation per epoch "
            "(validation runs every `trainer.val_every` epochs), mean over seeds with the seeds' min-max band."
        )
    if missing:
        captions.append(f"- {stem}: no training curves for {len(missing)} run(s) without an `epochs.csv` "
                        f"(run directory not found here), e.g. {missing[0]}")
    return written, captions


def make_figures(results, out_dir: str | Path, study: str | None = None, where: dict | None = None,
                 formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Figures of ``results`` (every study, or the one named; ``where`` filters on any config key) into
    ``out_dir`` (one study) or ``out_dir/<study>/`` (several), plus ``captions.md``; returns the paths written.
    ``results``, ``study``, ``where``: as ``make_tables`` (only ``ok`` runs are drawn: a diverged run has no
    figure to show). A cell whose runs differ in a setting other than the seed raises ``MixedSettings``."""
    from hardlinear.harness.results import report_table

    every = report_table(results, where=where)
    runs = runs_frame(every)
    others = every[~every["status"].isin(["ok", ""])] if len(every) else every
    studies = sorted(set(runs["study"]))
    if study is not None:
        if study not in studies:
            raise ValueError(f"no ok runs of study {study!r} to draw; studies with some: {', '.join(studies) or 'none'}")
        runs, studies = runs[runs["study"] == study], [study]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    captions = ["# Figures", ""]
    for name in studies:
        folder = out_dir if len(studies) == 1 else out_dir / name
        paths, lines = study_figures(runs[runs["study"] == name], folder, name, formats,
                                     others=others[others["study"] == name] if len(others) else None)
        written += paths
        if len(studies) > 1:
            captions += [f"## Study {name}", ""]
        captions += [*lines, ""]
    path = out_dir / "captions.md"
    path.write_text("\n".join(captions).rstrip("\n") + "\n")
    written.append(path)
    return written
