"""The paper's fixed layout: its five result tables and the penalty table, built from the results table.

``TABLES`` names each table's blocks (a problem and objective each); ``build_table`` and ``build_penalty_table``
fill a ``render.Table`` with our figures beside the paper's (``paper_reference``), using ``stats`` for the runs
of each row and ``labels`` for their names. How runs become table rows:

* a cell (a table row of one block) never mixes settings: when its runs (one per seed) differ in a config key
  other than the seed, ``MixedSettings`` names the keys and how to select one;
* a row with a ``diverged`` run reads "diverged (k of n seeds): <reason>", never figures; a row without runs
  reads "not run" or "not applicable", with the recorded reason;
* a table is a block per problem (``TableSpec.blocks``); a block holds our ``status == ok`` rows of that
  problem and objective (the portfolio block takes whatever objective our runs used and says so when it is not
  the paper's), excluding the penalty sweep; blocks split by (objective, form) when the CSV mixes them;
* rows are the paper's rows in the paper's order, then methods of ours the paper does not have. A row is a
  ``RowKey`` (method, variant, pre-trained or not); when some of its runs carry this table's ``experiment``
  only those are used, and a seed recorded twice counts once (the newest run);
* numbers are means over seeds (column ``Seeds``), worst = the mean over seeds of each seed's worst test
  instance; ``max |viol|`` is the largest absolute violation over every seed and test instance (float64,
  scientific notation: feasibility is the product); a paper row without a run of ours reads "not run", with
  the reason recorded in ``.skipped.csv`` when there is one, or "rerun queued" when its rows were moved to
  ``superseded.csv`` (scripts/maintainers/supersede.py) and not yet rerun;
* a mean over seeds can hide seeds that landed in different places (one feasible at 18 %, two infeasible at
  -9 % average to 0.2 %): when the per-seed gaps spread wider than ``SEED_SPREAD_POINTS`` and
  ``SEED_SPREAD_SHARE`` of the largest, the gap cell is marked with a dagger and the block's notes give every seed's gap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from hardlinear.reporting import paper_reference as paper
from hardlinear.reporting.labels import METHOD_LABELS, SOLVER_LABELS, RowKey, method_label, method_order, problem_title
from hardlinear.reporting.render import Block, Cell, Table
from hardlinear.reporting.stats import (
    Stats,
    _num,
    fmt,
    fmt_pair,
    fmt_sci,
    fmt_time,
    of_key,
    one_per_seed,
    row_key,
    seed_gaps_disagree,
    summarize,
    with_keys,
)

# --- rows ----------------------------------------------------------------------------------------------
# Our LP solver whose row carries the figures of the LP table's single "Optimizer" row.
LP_OPTIMIZER = "highs"
PENALTY_EXPERIMENT = "penalty_selection"
MISSING = "-"

PAPER_LABELS = {
    "Proposed": RowKey("proposed", "", True),
    "Optimizer (Gurobi)": RowKey("optimizer", "gurobi"),
    "Optimizer (OSQP)": RowKey("optimizer", "osqp"),
    "Optimizer": RowKey("optimizer", LP_OPTIMIZER),
    "Post projection (Gurobi)": RowKey("post_projection", "gurobi"),
    "Post projection (OSQP)": RowKey("post_projection", "osqp"),
    "APM": RowKey("apm"),
    "EAPM": RowKey("eapm"),
    "DC3": RowKey("dc3"),
    "LDR": RowKey("ldr"),
    "w/ pre-training": RowKey("proposed", "", True),
    "w/o pre-training": RowKey("proposed", "", False),
}


# --- specs ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BlockSpec:
    problem: str
    objective: str | None
    """None: whatever objective our runs used (the portfolio, whose published data is linear)."""


@dataclass(frozen=True)
class TableSpec:
    name: str
    paper: str
    title: str
    blocks: tuple[BlockSpec, ...]
    extras: bool = True
    """Append rows of ours that the paper does not have."""
    label_as_paper: bool = False
    """Show the paper's row labels (the pre-training ablation) instead of method labels."""


def _dcopf(objective: str, buses: Sequence[int]) -> tuple[BlockSpec, ...]:
    return tuple(BlockSpec(f"dcopf_{b}", objective) for b in buses)


TABLES: dict[str, TableSpec] = {
    "table_qp_main": TableSpec(
        "table_qp_main", "dcopt_qp", "Portfolio and DC-OPF (QP), 118 and 200 buses",
        (BlockSpec("portfolio", None),) + _dcopf("qp", (118, 200)),
    ),
    "table_lp": TableSpec("table_lp", "dcopt_lp", "DC-OPF (LP), 14 to 200 buses", _dcopf("lp", (14, 30, 57, 118, 200))),
    "table_qp_add": TableSpec("table_qp_add", "dcopt_qp_add", "DC-OPF (QP), 14, 30 and 57 buses", _dcopf("qp", (14, 30, 57))),
    "table_large": TableSpec(
        "table_large", "", "DC-OPF (LP) on larger PGLib cases, beyond the paper",
        tuple(BlockSpec(f"pglib_opf_case{c}", "lp") for c in ("300_ieee", "500_goc", "2000_goc", "6470_rte")),
    ),
    "table_pretrain": TableSpec(
        "table_pretrain", "proposedinit", "The proposed method with and without pre-training",
        (BlockSpec("portfolio", None),) + _dcopf("lp", (14, 30, 57, 118, 200)), extras=False, label_as_paper=True,
    ),
}
TABLE_NAMES = tuple(TABLES) + ("table_penalty",)


# --- the result tables ---------------------------------------------------------------------------------
MAIN_COLUMNS = [
    "Method", "Seeds", "Gap %", "Gap % (paper)", "Eq. viol.", "Eq. viol. (paper)", "Ineq. viol.", "Ineq. viol. (paper)",
    "max |viol|", "Time ms", "Time ms (paper)",
]
MAIN_GROUPS = [("", 2), ("Optimality gap (%)", 2), ("Equality violation", 2), ("Inequality violation", 2), ("", 1), ("Time ms (iterations)", 2)]
MAIN_METRICS = (
    "test/gap_mean", "test/gap_worst", "test/eq_viol_mean", "test/eq_viol_worst", "test/ineq_viol_mean",
    "test/ineq_viol_worst", "test/time_ms", "test/iterations", "test/max_abs_viol",
)
RESULT_STATUSES = ("ok", "", "diverged")
"""Statuses of runs that have metrics; ``diverged`` ones make their row read "diverged", never a normal row."""
DIVERGED_NOTE = (
    '"diverged": a run of the row has a non-finite loss or test metrics beyond eval.diverged_gap / '
    "eval.diverged_viol (status diverged in its record); the row's figures are not shown."
)
SEED_SPREAD_MARK = "†"
"""A dagger: plain in Markdown, ``\\dag{}`` in LaTeX (``render._TEX_SPECIAL``)."""


COMMON_NOTES = [
    "Gap: percent; violations: the paper's relative norms, mean(worst) over the 100 test instances, rounded to the "
    "paper's 3 decimals; max |viol|: our largest absolute constraint violation over all seeds and test instances "
    "(float64).",
    "Ours: mean over seeds (column Seeds; worst = mean over seeds of each seed's worst instance). A seed recorded "
    "twice counts once (the newest run); runs of this table's experiment are preferred when there are any.",
    "Time: mean milliseconds per instance at batch 1 (mean correction or solver iterations). Paper: "
    + paper.PAPER_HARDWARE + ".",
    '"not run": no run of ours in the results CSV (the reason, when the run was recorded as skipped or its rows were superseded).',
]


def _sizes(rows) -> dict[str, str]:
    out = {}
    for col in ("n", "m_eq", "m_ineq", "k"):
        vals = sorted({int(v) for v in (_num(x) for x in rows[col]) if not math.isnan(v)}) if col in rows.columns else []
        if vals:
            out[col] = "/".join(str(v) for v in vals)
    return out


NO_RESULT_LABELS = {"not_applicable": "not applicable"}
"""How a row without a result reads, by the status of its newest record ("not run" for the others)."""


def _skip_reason(skipped, problem: str, objective: str, key: RowKey, penalty: float | None = None) -> str | None:
    """The newest recorded reason why a row of ours has no run, prefixed by its status when that is not a plain
    skip ("not applicable: ..."); None when nothing was recorded."""
    if skipped is None or not len(skipped):
        return None
    s = skipped[(skipped["problem"] == problem) & (skipped["method"] == key.method) & (skipped["variant"] == key.variant)]
    s = s[(s["objective"] == "") | (s["objective"] == objective)]
    if key.pretrained is not None and len(s):
        s = s[[row_key(r).pretrained == key.pretrained for r in s.to_dict("records")]]
    if penalty is not None and len(s):
        s = s[[_num(p) == penalty for p in s["penalty"]]]
    if not len(s):
        return None
    newest = s.sort_values("timestamp", kind="stable").iloc[-1]
    reason = " ".join(str(newest["reason"]).split())
    reason = reason if len(reason) <= 70 else reason[:67] + "..."
    label = NO_RESULT_LABELS.get(str(newest.get("status", "")))
    return f"{label}: {reason}" if label else reason


def _not_run(skipped, problem, objective, key, penalty=None) -> str:
    reason = _skip_reason(skipped, problem, objective, key, penalty)
    if reason and reason.startswith(tuple(f"{v}:" for v in NO_RESULT_LABELS.values())):
        return reason
    return f"not run: {reason}" if reason else "not run"


def _diverged(runs) -> str | None:
    """"diverged (k of n seeds): <reason>" when any of a row's runs is recorded ``diverged``, else None: such a
    row is never shown as a normal row (a mean over a run that blew up means nothing)."""
    if not len(runs) or "status" not in runs.columns:
        return None
    bad = runs[runs["status"] == "diverged"]
    if not len(bad):
        return None
    reason = " ".join(str(bad["reason"].iloc[-1]).split()) if "reason" in bad.columns else ""
    reason = reason if len(reason) <= 60 else reason[:57] + "..."
    return f"diverged ({len(bad)} of {len(runs)} seeds): {reason}"


def _groups(pool, block: BlockSpec, paper_objective: str) -> list[tuple[str, str]]:
    """The (objective, form) combinations of our rows in a block (the paper's when we have none)."""
    combos = sorted({(str(o), str(f)) for o, f in zip(pool["objective"], pool["form"])})
    return combos or [(block.objective or paper_objective, "standard")]


def _block_notes(block: BlockSpec, objective: str, form: str, paper_objective: str, has_paper: bool) -> list[str]:
    notes = []
    if has_paper and block.objective is None and objective != paper_objective:
        notes.append(f"our objective: {objective}; the paper's table labels it {paper_objective}")
    if form not in ("", "standard"):
        notes.append(f"form: {form} (the paper's is standard)")
    return notes


def _main_row(label: str, stats: Stats | None, paper_row: paper.PaperRow | None, not_run: str, filler: str = "not run") -> list[Cell]:
    if stats is None or stats.seeds == 0:
        ours = [not_run, filler, filler, filler, filler]
        seeds = "0"
    else:
        m = stats.mean
        ours = [
            fmt_pair(m["test/gap_mean"], m["test/gap_worst"], 2),
            fmt_pair(m["test/eq_viol_mean"], m["test/eq_viol_worst"], 3),
            fmt_pair(m["test/ineq_viol_mean"], m["test/ineq_viol_worst"], 3),
            fmt_sci(stats.max_abs_viol),
            fmt_time(m["test/time_ms"], m["test/iterations"]),
        ]
        seeds = str(stats.seeds)
    if paper_row is None:
        theirs = [MISSING] * 4
    else:
        p = paper_row
        theirs = [
            f"{p.gap_mean}({p.gap_worst})", f"{p.eq_viol_mean}({p.eq_viol_worst})",
            f"{p.ineq_viol_mean}({p.ineq_viol_worst})", f"{p.time_ms}({p.iterations})" if p.iterations else p.time_ms,
        ]
    cells = [label, seeds, ours[0], theirs[0], ours[1], theirs[1], ours[2], theirs[2], ours[3], ours[4], theirs[3]]
    return [Cell(c) for c in cells]


def _mark_seed_spread(row: list[Cell], label: str, runs) -> str | None:
    """Dagger ``row``'s gap cell (index 2) when its seeds disagree; the block note giving every seed's gap, or None."""
    gaps = [_num(v) for v in runs["test/gap_mean"]] if "test/gap_mean" in runs.columns else []
    if not seed_gaps_disagree(gaps):
        return None
    row[2] = Cell(row[2].text + SEED_SPREAD_MARK, row[2].bold)
    per_seed = ", ".join(f"{fmt(g, 2)} (seed {int(seed)})" for g, seed in zip(gaps, runs["seed"]))
    return f"{SEED_SPREAD_MARK}{label}: seeds disagree, gap % per seed {per_seed}; the mean hides it"


def _budget_note(label: str, runs) -> str | None:
    """The block note for seeds whose training a wall-clock budget stopped (``trainer.time_budget_s``): their
    row is not the paper's schedule, and the table must say so; None when no seed's was."""
    if "train/budget_spent" not in runs.columns:
        return None
    nan = [math.nan] * len(runs)
    cut = [
        (int(seed), _num(epochs), _num(planned))
        for seed, spent, epochs, planned in zip(
            runs["seed"], runs["train/budget_spent"], runs.get("train/epochs", nan), runs.get("cfg.trainer.epochs", nan)
        )
        if _num(spent) > 0
    ]
    if not cut:
        return None
    seeds = ", ".join(
        f"seed {seed}: {fmt(epochs, 1)}" + (f" of {fmt(planned, 0)}" if math.isfinite(planned) else "") + " epochs"
        for seed, epochs, planned in cut
    )
    return f"{label}: training stopped by a wall-clock budget (trainer.time_budget_s), not the full schedule ({seeds})"


def build_table(spec: TableSpec, df, skipped=None) -> Table:
    """One of the paper's result tables (``TABLES``) from the results DataFrame (``hardlinear.harness.results.load_records``)."""
    df = with_keys(df[(df["status"].isin(RESULT_STATUSES)) & (df["experiment"] != PENALTY_EXPERIMENT)])
    paper_rows = paper.paper_table(spec.paper) if spec.paper else ()
    any_diverged = False
    blocks, devices = [], set()
    for bspec in spec.blocks:
        prow_all = [r for r in paper_rows if r.problem == bspec.problem]
        paper_objective = prow_all[0].objective if prow_all else (bspec.objective or "")
        pool = df[df["problem"] == bspec.problem]
        if bspec.objective is not None:
            pool = pool[pool["objective"] == bspec.objective]
        for objective, form in _groups(pool, bspec, paper_objective):
            sub = pool[(pool["objective"] == objective) & (pool["form"] == form)]
            has_paper = bool(prow_all) and (bspec.objective is None or objective == paper_objective)
            prows = prow_all if has_paper else []
            rows, claimed, spread_notes = [], set(), []
            for pr in prows:
                key = PAPER_LABELS[pr.method]
                claimed.add(key)
                runs = one_per_seed(of_key(sub, key), spec.name)
                devices.update(runs["device"])
                label = pr.method if spec.label_as_paper else method_label(key)
                diverged = _diverged(runs)
                any_diverged |= diverged is not None
                stats = summarize(runs, MAIN_METRICS) if len(runs) and not diverged else None
                rows.append(_main_row(label, stats, pr, diverged or _not_run(skipped, bspec.problem, objective, key), "diverged" if diverged else "not run"))
                spread_notes.append(None if diverged else _mark_seed_spread(rows[-1], label, runs))
                spread_notes.append(_budget_note(label, runs))
            extra_keys = sorted(set(sub["_key"]) - claimed, key=method_order) if spec.extras else []
            for key in extra_keys:
                runs = one_per_seed(of_key(sub, key), spec.name)
                devices.update(runs["device"])
                diverged = _diverged(runs)
                any_diverged |= diverged is not None
                stats = None if diverged else summarize(runs, MAIN_METRICS)
                rows.append(_main_row(method_label(key), stats, None, diverged or "not run", "diverged" if diverged else "not run"))
                spread_notes.append(None if diverged else _mark_seed_spread(rows[-1], method_label(key), runs))
                spread_notes.append(_budget_note(method_label(key), runs))
            blocks.append(Block(
                problem_title(bspec.problem, objective), _sizes(sub), paper.paper_sizes(bspec.problem),
                _block_notes(bspec, objective, form, paper_objective, has_paper) + [n for n in spread_notes if n], rows,
            ))
    notes = list(COMMON_NOTES)
    if any_diverged:
        notes.append(DIVERGED_NOTE)
    if spec.paper == "dcopt_lp":
        notes.append(
            f'The paper\'s LP table has a single "Optimizer" row; its figures sit beside our default LP solver, '
            f"{SOLVER_LABELS[LP_OPTIMIZER]} (row {method_label(PAPER_LABELS['Optimizer'])})."
        )
    if spec.label_as_paper:
        notes.append("Rows: the proposed method with pretrain_epochs > 0 (w/) and = 0 (w/o).")
    notes.append("Our devices: " + (", ".join(sorted(d for d in devices if d)) or "none recorded") + ".")
    beside = f"our runs beside the paper's table {spec.paper} (paper figures in the (paper) columns)" if spec.paper else "our runs (the paper has no such table: its columns are empty)"
    caption = (
        f"{spec.title}: {beside}. "
        "Optimality gap, equality and inequality violations as mean(worst); time as ms per instance (iterations)."
    )
    return Table(spec.name, spec.title, caption, list(MAIN_COLUMNS), list(MAIN_GROUPS), blocks, notes)


# --- the penalty table ----------------------------------------------------------------------------------
PENALTY_COLUMNS = [
    "Method", "Penalty", "Seeds", "Val gap %", "Val ineq. viol.", "Gap %", "Eq. viol.", "Ineq. viol.", "max |viol|",
    "Selected (ours)", "Paper",
]
PENALTY_GROUPS = [("", 3), ("Validation", 2), ("Test", 4), ("", 2)]
VAL_METRICS = ("val/gap_mean", "val/gap_worst", "val/ineq_viol_mean", "val/ineq_viol_worst")


def _penalty_str(value: float) -> str:
    return f"{value:g}"


def select_penalty(candidates: dict[float, Stats]) -> float | None:
    """Our selection rule: feasibility first (smallest mean validation inequality violation at the paper's
    3 decimals), then the smallest mean validation gap. None when no candidate has validation metrics."""
    scored = [
        (round(s.mean["val/ineq_viol_mean"], 3), s.mean["val/gap_mean"], p)
        for p, s in candidates.items()
        if s.seeds and not math.isnan(s.mean["val/ineq_viol_mean"]) and not math.isnan(s.mean["val/gap_mean"])
    ]
    return min(scored)[2] if scored else None


def build_penalty_table(df, skipped=None, experiment: str = PENALTY_EXPERIMENT) -> Table:
    """Penalty-factor selection for DC3 and ALM (the paper's penalty table) from the penalty-sweep rows."""
    df = with_keys(df[(df["status"].isin(RESULT_STATUSES)) & (df["experiment"] == experiment)])
    has_val = all(c in df.columns for c in VAL_METRICS)
    grids = {(g.problem, g.method): g for g in paper.paper_penalties()}
    problems = list(dict.fromkeys([g.problem for g in paper.paper_penalties()] + sorted(set(df["problem"]))))
    paper_methods = list(dict.fromkeys(g.method for g in paper.paper_penalties()))
    blocks = []
    for problem in problems:
        pool = df[df["problem"] == problem]
        combos = sorted({(str(o), str(f)) for o, f in zip(pool["objective"], pool["form"])}) or [("", "standard")]
        for objective, form in combos:
            sub = pool[(pool["objective"] == objective) & (pool["form"] == form)]
            ours_methods = sorted({k.method for k in sub["_key"]} - {m.lower() for m in paper_methods}, key=lambda m: method_order(RowKey(m)))
            rows = []
            for method in [m.lower() for m in paper_methods] + ours_methods:
                grid = grids.get((problem, METHOD_LABELS.get(method, method)))
                runs_m = sub[[k.method == method for k in sub["_key"]]] if len(sub) else sub
                values = {_num(p) for p in runs_m["penalty"]} | ({_num(p) for p in grid.grid} if grid else set())
                candidates, diverged = {}, {}
                for value in sorted(v for v in values if not math.isnan(v)):
                    runs = one_per_seed(runs_m[[_num(p) == value for p in runs_m["penalty"]]]) if len(runs_m) else runs_m
                    diverged[value] = _diverged(runs)
                    candidates[value] = summarize(runs if not diverged[value] else runs.iloc[:0], MAIN_METRICS + VAL_METRICS)
                chosen = select_penalty(candidates) if has_val else None
                for value, stats in candidates.items():
                    paper_mark = MISSING
                    if grid is not None and value in {_num(p) for p in grid.grid}:
                        paper_mark = "selected" if value == _num(grid.selected) else "tried"
                    label = METHOD_LABELS.get(method, method)
                    if diverged[value]:
                        ours = [diverged[value]] + ["diverged"] * 5 + [""]
                    elif stats.seeds == 0:
                        not_run = _not_run(skipped, problem, objective, RowKey(method), value)
                        ours = [not_run] + ["not run"] * 5 + [""]
                    else:
                        m = stats.mean
                        val_cells = (
                            [fmt_pair(m["val/gap_mean"], m["val/gap_worst"], 2), fmt_pair(m["val/ineq_viol_mean"], m["val/ineq_viol_worst"], 3)]
                            if has_val else ["n/a", "n/a"]
                        )
                        ours = val_cells + [
                            fmt_pair(m["test/gap_mean"], m["test/gap_worst"], 2),
                            fmt_pair(m["test/eq_viol_mean"], m["test/eq_viol_worst"], 3),
                            fmt_pair(m["test/ineq_viol_mean"], m["test/ineq_viol_worst"], 3),
                            fmt_sci(stats.max_abs_viol),
                            "selected" if value == chosen else "",
                        ]
                    row = [Cell(label), Cell(_penalty_str(value), bold=value == chosen), Cell(str(stats.seeds))]
                    rows.append(row + [Cell(c) for c in ours] + [Cell(paper_mark)])
            if rows:
                blocks.append(Block(problem_title(problem, objective), _sizes(sub), paper.paper_sizes(problem), [], rows))
    notes = [
        "Our selection (bold): the smallest mean validation inequality violation at 3 decimals, then the smallest "
        "mean validation gap. Paper column: the paper's grid (tried) and its choice (selected).",
        "Validation figures are the best checkpoint's (columns val/... of the results CSV); test figures as in the "
        "other tables (mean(worst), mean over seeds).",
    ]
    if not has_val:
        notes.append("The results CSV has no val/ columns, so no value of ours is selected (n/a).")
    caption = "Penalty factor selection for DC3 and ALM: our sweep beside the paper's grid and choice."
    return Table("table_penalty", "Penalty factor selection", caption, list(PENALTY_COLUMNS), list(PENALTY_GROUPS), blocks, notes)
