"""A table for any study: one block per problem (by content), one row per method, every run accounted for.

The paper's fixed-layout tables (``paper_tables``) cover the paper's problems only; a user's own study (an
``.npz`` of ``problem=linear``, ``trainer=fast``, methods the paper never ran) gets this one. Per problem and
method, over the seeds of the runs with results (``ok``, ``diverged``): the gap's mean and standard deviation
over seeds, the worst gap, the gap's shifted geometric mean and median, 95th and 99th percentiles, mean and worst equality and inequality violations, batch-1 latency, throughput,
training time and epochs. A row whose runs violate the constraints beyond ``FEASIBILITY_TOL`` is marked, so a
negative gap never reads as a win. Runs without results (not applicable, skipped, failed, interrupted) get a row
with their status and reason; a method with some seeds ok and others not gets a note naming them.

Problems are keyed by content: two files under one name (``problem_sha256``, the first 12 hex digits of the
file's sha256) are two blocks, each naming its file and digest, and a note says they were split. The caption
names the settings every run of the study shares that differ from the defaults (``default_settings``: the
repository's ``conf/config.yaml`` and ``conf/trainer/default.yaml``), e.g. ``trainer=fast, epochs 4``, and apart from
them the settings that differ between runs, with how many runs had each value (a ``trainer.resume`` one run of 21
had is not the study's).

Output (``write_study_table``): ``study.md``, ``study.tex`` (via ``render``) and ``study.csv`` (tidy: one line per
problem and method, every number unrounded), byte-identical for the same records.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hardlinear.evaluation.metrics import FEASIBILITY_TOL
from hardlinear.reporting.labels import problem_title
from hardlinear.reporting.render import Block, Cell, Table, render_latex, render_markdown
from hardlinear.reporting.stats import (
    check_one_setting,
    epochs_text,
    fmt_sci,
    row_label,
    rows_by_setting,
    summarize,
    with_keys,
)

RESULT_STATUSES = ("ok", "diverged", "")
"""Statuses whose runs have metrics (``""``: legacy CSV rows)."""
GAP_STATISTICS = ("test/gap_sgm", "test/gap_median", "test/gap_p95", "test/gap_p99")
"""The gap's shifted geometric mean (1 % shift) and quantiles (``hardlinear.evaluation.metrics.gap_statistics``):
records written before they existed lack them, and their cells read ``-``."""
METRICS = (
    "test/gap_mean", "test/gap_worst", *GAP_STATISTICS, "test/eq_viol_mean", "test/eq_viol_worst", "test/ineq_viol_mean",
    "test/ineq_viol_worst", "test/time_ms", "test/throughput", "train/time_s", "train/epochs",
)
COLUMNS = [
    "Method", "Seeds", "Gap % (mean ± sd)", "Worst gap %", "Gap SGM % (1 % shift)", "Gap median / p95 / p99 %",
    "Eq. viol. mean (worst)", "Ineq. viol. mean (worst)", "Feasible", "Time ms (batch 1)", "Throughput /s", "Train s",
    "Epochs", "Status",
]
SETTING_SECTIONS = ("trainer.", "data.", "eval.", "network.", "dtype", "device", "threads")
"""Config keys the caption compares with the defaults (the problem, the method and the seed vary by design)."""
PROBLEM_KEY = ("problem", "objective", "form", "uncertainty", "problem_sha256")
NAME = "study"


# --- defaults -------------------------------------------------------------------------------------------------
def default_settings(conf_dir: str | os.PathLike) -> dict[str, Any]:
    """The defaults a run gets with no override: ``conf/config.yaml``'s keys and ``conf/trainer/default.yaml``'s,
    flat (``trainer.lr``). Interpolations (``${problem.train.epochs}``) are kept as text and resolved per run."""
    from omegaconf import OmegaConf

    from hardlinear.harness.results import flatten

    conf_dir = Path(conf_dir)
    base = OmegaConf.to_container(OmegaConf.load(conf_dir / "config.yaml"), resolve=False)
    base = {k: v for k, v in base.items() if k not in ("defaults", "hydra")}
    trainer = OmegaConf.to_container(OmegaConf.load(conf_dir / "trainer" / "default.yaml"), resolve=False)
    return {**flatten(base), **{f"trainer.{k}": v for k, v in flatten(trainer).items()}}


def _default_for(key: str, defaults: Mapping[str, Any], run: Mapping[str, Any]) -> Any:
    value = defaults.get(key)
    if isinstance(value, str) and value.startswith("${") and value.endswith("}"):
        return run.get("cfg." + value[2:-1])  # the run's own value of the interpolated key
    return value


def shared_settings(df, defaults: Mapping[str, Any]) -> list[str]:
    """``["trainer.name=fast", "trainer.epochs=4", ...]``: the settings every run of ``df`` with a recorded config has,
    with one value, that differ from the defaults."""
    return _settings(df, defaults)[0]


def varying_settings(df, defaults: Mapping[str, Any]) -> list[str]:
    """``["trainer.lr: 0.001 (2 runs), 0.01 (2 runs)", "trainer.resume: runs/x (1 run), unset (20 runs)"]``: the
    settings whose value differs between the runs with a recorded config (unset in some counts as a value), so a
    setting one run of 21 had is never read as the study's."""
    return _settings(df, defaults)[1]


def _settings(df, defaults: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    from hardlinear.harness.results import CONFIG_PREFIX, _canon

    shared, varying = [], []
    columns = sorted(c for c in df.columns if c.startswith(CONFIG_PREFIX) and c[len(CONFIG_PREFIX):].startswith(SETTING_SECTIONS))
    all_config = [c for c in df.columns if c.startswith(CONFIG_PREFIX)]
    rows = [r for r in df.to_dict("records") if any(not _missing(r[c]) for c in all_config)]  # legacy rows have none
    for col in columns:
        key = col[len(CONFIG_PREFIX):]
        if key == "trainer.progress":
            continue
        texts = ["unset" if _missing(r[col]) else _canon(r[col]).strip(chr(34)) for r in rows]
        counts = {t: texts.count(t) for t in sorted(set(texts), key=lambda t: (t == "unset", t))}
        if set(counts) <= {"unset"}:
            continue
        if len(counts) > 1:
            varying.append(f"{key}: " + ", ".join(f"{t} ({n} run{'s' if n > 1 else ''})" for t, n in counts.items()))
            continue
        if key.startswith("eval.time_instances") and rows[0][col] is None:
            continue
        if all(_canon(r[col]) == _canon(_default_for(key, defaults, r)) for r in rows):
            continue
        shared.append(f"{key}={texts[0]}")
    return shared, varying


def _missing(value) -> bool:
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))


# --- blocks -----------------------------------------------------------------------------------------------------
def _problem_keys(df) -> list[tuple]:
    cols = [c for c in PROBLEM_KEY if c in df.columns]
    keys = {tuple("" if _missing(r.get(c)) else str(r.get(c)) for c in PROBLEM_KEY) for r in df[cols].to_dict("records")}
    return sorted(keys)


def _of_problem(df, key: tuple):
    mask = [True] * len(df)
    for col, value in zip(PROBLEM_KEY, key):
        if col in df.columns:
            mask = [m and ("" if _missing(v) else str(v)) == value for m, v in zip(mask, df[col])]
    return df[mask]


def _file_of(rows) -> str:
    col = "cfg.problem.path"
    if col not in rows.columns:
        return ""
    names = sorted({os.path.basename(str(v)) for v in rows[col] if not _missing(v)})
    return ", ".join(names)


def _title(key: tuple, rows) -> str:
    problem, objective, form, uncertainty, sha = key
    title = problem_title(problem, objective)
    extras = [f"form {form}"] if form and form != "inequality" else []
    if uncertainty:
        extras.append(f"uncertainty {uncertainty}")
    if sha:
        extras.append(f"file {_file_of(rows) or '?'}, sha256 {sha}")
    return f"{title} ({'; '.join(extras)})" if extras else title


def _sizes(rows) -> dict[str, str]:
    out = {}
    for col in ("n", "m_eq", "m_ineq", "k"):
        if col in rows.columns:
            values = sorted({int(v) for v in rows[col] if not _missing(v)})
            if values:
                out[col] = "/".join(str(v) for v in values)
    return out


def _num(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _worst(rows, col: str) -> float:
    values = [_num(v) for v in rows[col]] if col in rows.columns else []
    values = [v for v in values if not math.isnan(v)]
    return max(values) if values else math.nan


def _g(x: float, digits: int = 3) -> str:
    return "nan" if math.isnan(x) else f"{x:.{digits}g}"


def _reason(text: Any) -> str:
    return " ".join(str(text or "").split())


def _cell_figures(runs) -> dict[str, float]:
    """The numbers of one (problem, method) cell: means over seeds and worsts over every instance of every seed."""
    stats = summarize(runs, METRICS)
    figures = {f"{m} mean": stats.mean[m] for m in METRICS}
    figures["test/gap_mean sd"] = stats.std["test/gap_mean"]
    for col in ("test/gap_worst", "test/eq_viol_worst", "test/ineq_viol_worst"):
        figures[f"{col} max"] = _worst(runs, col)
    nonfinite = sum(v for v in map(_num, runs["test/nonfinite"]) if v == v) if "test/nonfinite" in runs.columns else 0.0
    if nonfinite > 0:  # instances whose output held NaN or inf (a column of the CSV only where there are some)
        figures["test/nonfinite sum"] = nonfinite
    figures["seeds"] = stats.seeds
    return figures


def _gap_statistics_cells(runs, figures: Mapping[str, float]) -> list[Cell]:
    """The SGM cell and the median / p95 / p99 cell: means over seeds of each seed's figure, ``-`` where no run
    recorded them (records older than the statistics)."""
    def text(col: str) -> str:
        recorded = col in runs.columns and any(not _missing(v) for v in runs[col])
        return _g(figures[f"{col} mean"]) if recorded else "-"

    return [Cell(text("test/gap_sgm")), Cell(" / ".join(text(c) for c in GAP_STATISTICS[1:]))]


def feasible(figures: Mapping[str, float]) -> bool | None:
    """Whether the worst violations stay within ``FEASIBILITY_TOL`` (None when not recorded)."""
    if figures.get("test/nonfinite sum", 0.0) > 0:  # an output with NaN or inf satisfies no constraint
        return False
    worst = [figures.get("test/eq_viol_worst max", math.nan), figures.get("test/ineq_viol_worst max", math.nan)]
    worst = [w for w in worst if not math.isnan(w)]
    return None if not worst else max(worst) <= FEASIBILITY_TOL


def _status_text(runs, others) -> str:
    parts = []
    for status in sorted(set(runs["status"]) | set(others["status"])):
        seeds = sorted({int(s) for s in (runs if status in RESULT_STATUSES else others).query("status == @status")["seed"] if not _missing(s)})
        parts.append(f"{status or 'ok'} ({len(seeds)})")
    return ", ".join(parts)


def _method_rows(prows):
    """``(RowKey, setting, rows)`` per table row of one problem (``stats.rows_by_setting``): every setting in which the
    problem's runs differ (a learning rate, a batch size, batch norm) is in each row's label, never a mean of both."""
    return rows_by_setting(prows)


def build_study_table(df, study: str, defaults: Mapping[str, Any] | None = None) -> tuple[Table, list[dict[str, Any]]]:
    """The ``Table`` of one study and its tidy rows (for the CSV); ``df``: that study's results rows (every status)."""
    df = with_keys(df)
    settings, varying = _settings(df, defaults or {})
    blocks: list[Block] = []
    tidy: list[dict[str, Any]] = []
    notes: list[str] = []
    names: dict[str, set] = {}
    for pkey in _problem_keys(df):
        prows = _of_problem(df, pkey)
        if pkey[4]:
            names.setdefault(f"{pkey[0]} ({_file_of(prows)})", set()).add(pkey[4])
        rows, block_notes = [], []
        for mkey, setting, mrows in _method_rows(prows):
            with_result = mrows[mrows["status"].isin(RESULT_STATUSES)]
            others = mrows[~mrows["status"].isin(RESULT_STATUSES)]
            runs = with_result.sort_values(["timestamp", "config_hash"], kind="stable").drop_duplicates("seed", keep="last")
            others = others[~others["seed"].isin(set(runs["seed"]))]
            label = row_label(mkey, setting)
            record = {"study": study, "problem": pkey[0], "objective": pkey[1], "form": pkey[2], "uncertainty": pkey[3],
                      "problem_sha256": pkey[4], "problem_file": _file_of(mrows), "method": mkey.method,
                      "variant": mkey.variant, "setting": setting, "label": label}
            if len(runs):
                check_one_setting(runs)
                figures = _cell_figures(runs)
                ok = feasible(figures)
                flag = "" if ok is not False else " †"
                rows.append([
                    Cell(label + flag), Cell(str(figures["seeds"])),
                    Cell(f"{_g(figures['test/gap_mean mean'])} ± {_g(figures['test/gap_mean sd'], 2)}"),
                    Cell(_g(figures["test/gap_worst max"])),
                    *_gap_statistics_cells(runs, figures),
                    Cell(f"{fmt_sci(figures['test/eq_viol_mean mean'])} ({fmt_sci(figures['test/eq_viol_worst max'])})"),
                    Cell(f"{fmt_sci(figures['test/ineq_viol_mean mean'])} ({fmt_sci(figures['test/ineq_viol_worst max'])})"),
                    Cell({True: "yes", False: "NO", None: "?"}[ok]),
                    Cell(_g(figures["test/time_ms mean"])), Cell(_g(figures["test/throughput mean"], 4)),
                    Cell(_g(figures["train/time_s mean"])),
                    Cell(epochs_text(list(runs["train/epochs"]) if "train/epochs" in runs.columns else [],
                                     list(runs["train/budget_spent"]) if "train/budget_spent" in runs.columns else [])),
                    Cell(_status_text(runs, others)),
                ])
                tidy.append({**record, **figures, "feasible": ok, "status": _status_text(runs, others), "reason": ""})
                if figures.get("test/nonfinite sum", 0.0) > 0:
                    block_notes.append(f"{label}: non-finite outputs (NaN or inf) on {figures['test/nonfinite sum']:.0f} "
                                       "test instances over its seeds")
                if (runs["status"] == "diverged").any():
                    block_notes.append(f"{label}: diverged: {_reason(runs[runs['status'] == 'diverged'].iloc[0]['reason'])}")
            for status in sorted(set(others["status"])):
                srows = others[others["status"] == status]
                seeds = sorted({int(s) for s in srows["seed"] if not _missing(s)})
                reason = _reason(srows.iloc[-1]["reason"])
                text = f"{status.replace('_', ' ')}: {reason}" if reason else status.replace("_", " ")
                if len(runs):
                    block_notes.append(f"{label}: seeds {seeds} {text}")
                else:
                    rows.append([Cell(label), Cell(str(len(seeds)))] + [Cell("-")] * (len(COLUMNS) - 3) + [Cell(text)])
                tidy.append({**record, "seeds": len(seeds), "status": status, "reason": reason})
        blocks.append(Block(title=_title(pkey, prows), sizes=_sizes(prows), paper_sizes=None, notes=block_notes, rows=rows))
    for name, digests in sorted(names.items()):
        if len(digests) > 1:
            notes.append(f"{name}: {len(digests)} different contents under one name, kept apart by sha256: {', '.join(sorted(digests))}")
    notes.append(f"† and Feasible=NO: the worst equality or inequality violation exceeds {FEASIBILITY_TOL:g} "
                 "(relative norm): the gap of such a row is not comparable with a feasible one's.")
    notes.append("Gap: mean over seeds of each seed's mean relative suboptimality (%), ± the standard deviation over "
                 "seeds; worst: over every test instance of every seed. SGM: the shifted geometric mean exp(mean(log(gap + 1))) - 1 "
                 "of the gaps in percent (Chen, Tanneau, Van Hentenryck, IEEE TPWRS 2024), and the median, 95th and 99th "
                 "percentiles of each seed's test gaps, each a mean over seeds. Violations: mean over seeds (worst over all).")
    notes.append("Rows: the paper's methods in the paper's order, then the peers (HardNet-Aff, Pinet, FSNet, Gauge, "
                 "Projection layer), then other methods alphabetically.")
    caption = (f"Study {study}: {len(df)} runs. Settings shared by all its runs that differ from the defaults: "
               + (", ".join(settings) if settings else "none") + "."
               + (" Settings that differ between its runs: " + "; ".join(varying) + "." if varying else ""))
    table = Table(name=NAME, title=f"Study {study}", caption=caption, columns=list(COLUMNS), groups=[("", len(COLUMNS))],
                  blocks=blocks, notes=notes)
    return table, tidy


TIDY_COLUMNS = (
    "study", "problem", "objective", "form", "uncertainty", "problem_file", "problem_sha256", "method", "variant",
    "setting", "label", "status", "reason", "seeds", "feasible",
)


def render_csv(tidy: list[dict[str, Any]]) -> str:
    """The tidy CSV: one line per problem and method (and per status without results), numbers unrounded."""
    metric_cols = sorted({k for row in tidy for k in row} - set(TIDY_COLUMNS))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([*TIDY_COLUMNS, *metric_cols])
    for row in tidy:
        values = [row.get(c, "") for c in (*TIDY_COLUMNS, *metric_cols)]
        writer.writerow(["" if v is None or (isinstance(v, float) and math.isnan(v)) else (repr(v) if isinstance(v, float) else v) for v in values])
    return buf.getvalue()


def write_study_table(df, out_dir: str | os.PathLike, study: str, defaults: Mapping[str, Any] | None = None) -> dict[str, Path]:
    """Write ``study.md``, ``study.tex`` and ``study.csv`` of one study's rows into ``out_dir``; returns the paths."""
    from hardlinear.runtime.atomic import atomic_write_bytes

    table, tidy = build_study_table(df, study, defaults)
    out_dir = Path(out_dir)
    written = {}
    for suffix, text in ((".md", render_markdown(table)), (".tex", render_latex(table)), (".csv", render_csv(tidy))):
        path = atomic_write_bytes(out_dir / f"{NAME}{suffix}", text.encode())
        written[path.name] = path
    return written
