"""The paper's five tables from the results table, with the paper's figures in adjacent columns.

Pure functions of the derived results table (``hardlinear.harness.results.load_records``: the records under the
roots given, and the legacy ``results/paper/runs.csv`` with its ``.skipped.csv`` and ``superseded.csv``):
nothing is rerun, and the same records give byte-identical Markdown and LaTeX. One call renders one
selection (a study, a filter on config keys). How runs become table rows:

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
  ``superseded.csv`` (scripts/supersede.py) and not yet rerun;
* a mean over seeds can hide seeds that landed in different places (one feasible at 18 %, two infeasible at
  -9 % average to 0.2 %): when the per-seed gaps spread wider than ``SEED_SPREAD_POINTS`` and
  ``SEED_SPREAD_SHARE`` of the largest, the gap cell is marked with a dagger and the block's notes give every seed's gap.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hardlinear.reporting import paper_reference as paper

# --- labels ---------------------------------------------------------------------------------------------
METHOD_LABELS = {
    "proposed": "Proposed", "optimizer": "Optimizer", "post_projection": "Post projection", "apm": "APM",
    "eapm": "EAPM", "dc3": "DC3", "ldr": "LDR", "penalty": "Penalty", "alm": "ALM",
}
# Extra rows of ours are ordered as here (then alphabetically); the paper's rows keep the paper's order.
METHOD_ORDER = tuple(METHOD_LABELS)
SOLVER_LABELS = {"gurobi": "Gurobi", "osqp": "OSQP", "highs": "HiGHS", "clarabel": "Clarabel", "scs": "SCS"}
# Methods whose rows split by pre-training (``pretrain_epochs`` 0 or not); for others the column is ignored.
PRETRAINED_METHODS = frozenset({"proposed"})
# Our LP solver whose row carries the figures of the LP table's single "Optimizer" row.
LP_OPTIMIZER = "highs"
PENALTY_EXPERIMENT = "penalty_selection"
PROBLEM_TITLES = {"portfolio": "Portfolio optimization problem"}
MISSING = "-"


@dataclass(frozen=True, order=True)
class RowKey:
    """What makes a table row: the method, its variant (the solver, or e.g. ``gradient=ste``), pre-training."""

    method: str
    variant: str = ""
    pretrained: bool | None = None


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


def method_label(key: RowKey) -> str:
    """Our label of a row: ``optimizer``/``gurobi`` -> "Optimizer (Gurobi)"; unknown names pass through."""
    parts = [SOLVER_LABELS.get(key.variant, key.variant)] if key.variant else []
    if key.pretrained is False:
        parts.append("w/o pre-training")
    base = METHOD_LABELS.get(key.method, key.method)
    return f"{base} ({', '.join(parts)})" if parts else base


def problem_title(problem: str, objective: str) -> str:
    """The paper's block title: "DC-OPF (LP) 118-bus system", "Portfolio optimization problem"."""
    if problem in PROBLEM_TITLES:
        return PROBLEM_TITLES[problem]
    m = re.fullmatch(r"pglib_opf_case(\d+)_(\w+)", problem)
    if m:
        kind = f"DC-OPF ({objective.upper()})" if objective else "DC-OPF"
        return f"{kind} {m.group(1)}-bus system (PGLib {m.group(0)})"
    m = re.fullmatch(r"dcopf_(\d+)", problem)
    if m:
        return f"DC-OPF ({objective.upper()}) {m.group(1)}-bus system" if objective else f"DC-OPF {m.group(1)}-bus system"
    return f"{problem} ({objective})" if objective else problem


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


# --- numbers --------------------------------------------------------------------------------------------
@dataclass
class Stats:
    """Our figures for one table row: means (and standard deviations) over seeds."""

    seeds: int
    mean: dict[str, float] = field(default_factory=dict)
    std: dict[str, float] = field(default_factory=dict)
    max_abs_viol: float = math.nan


def _num(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def row_key(record) -> RowKey:
    """The ``RowKey`` of one results row (a mapping or a pandas row)."""
    method = str(record["method"])
    pretrained = None
    if method in PRETRAINED_METHODS:
        epochs = _num(record.get("pretrain_epochs", math.nan))
        pretrained = not (epochs == 0)  # NaN (not recorded) counts as the default, pre-trained
    return RowKey(method, str(record.get("variant", "") or ""), pretrained)


def with_keys(df):
    """``df`` plus a ``_key`` column (the ``RowKey`` of every row)."""
    df = df.copy()
    df["_key"] = [row_key(r) for r in df.to_dict("records")] if len(df) else []
    return df


def of_key(rows, key: RowKey):
    """The rows of ``rows`` (with ``_key``) that belong to the table row ``key``."""
    return rows[[k == key for k in rows["_key"]]] if len(rows) else rows


class MixedSettings(ValueError):
    """The runs of one table cell differ in a setting other than the seed: their mean would mix settings."""


def _setting_keys(columns) -> list[str]:
    """The ``cfg.*`` columns that are settings of a result: config keys that count for the identity, minus the seed."""
    from hardlinear.harness.results import CONFIG_PREFIX, NON_IDENTITY_KEYS

    def counts(key: str) -> bool:
        return key != "seed" and not any(key == k or key.startswith(k + ".") for k in NON_IDENTITY_KEYS)

    return [c for c in columns if c.startswith(CONFIG_PREFIX) and counts(c[len(CONFIG_PREFIX):])]


def _missing(value) -> bool:
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))


def mixed_settings(rows) -> dict[str, list[str]]:
    """``{key: [values]}`` for every setting in which the rows differ (a row without the key, e.g. one of the
    legacy CSV, which has no config, is compatible with any value)."""
    from hardlinear.harness.results import CONFIG_PREFIX, _canon

    out = {}
    for col in _setting_keys(rows.columns):
        values = sorted({_canon(v) for v in rows[col] if not _missing(v)})
        if len(values) > 1:
            out[col[len(CONFIG_PREFIX):]] = values
    return out


def check_one_setting(rows) -> None:
    """Refuse (``MixedSettings``, naming the keys) when the runs of one cell differ in a setting besides the seed."""
    if len(rows) < 2:
        return
    mixed = mixed_settings(rows)
    if mixed:
        first = rows.iloc[0]
        what = "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(mixed.items()))
        example = next(iter(sorted(mixed)))
        raise MixedSettings(
            f"the runs of {first['problem']}/{first['method']}{' ' + str(first['variant']) if first.get('variant') else ''} "
            f"(study {', '.join(sorted(set(rows['study'])) if 'study' in rows else [])}) "
            f"differ in {what}: a table cell never mixes settings. Select one: make tables STUDY=<study> "
            f"WHERE='{example}=<value>' (scripts/make_tables.py --study ... --where {example}=...)"
        )


def one_per_seed(rows, experiment: str | None = None):
    """Runs of one table row: this experiment's when there are some, one run per seed (the newest); refuses
    (``MixedSettings``) when those runs differ in a setting other than the seed."""
    if experiment is not None and (rows["experiment"] == experiment).any():
        rows = rows[rows["experiment"] == experiment]
    rows = rows.sort_values(["timestamp", "config_hash"], kind="stable")
    rows = rows.drop_duplicates("seed", keep="last").sort_values("seed", kind="stable")
    check_one_setting(rows)
    return rows


def summarize(rows, metrics: Sequence[str]) -> Stats:
    """Mean and standard deviation over seeds of each metric column (missing columns give NaN)."""
    stats = Stats(seeds=int(rows["seed"].nunique()) if len(rows) else 0)
    for col in metrics:
        values = [_num(v) for v in rows[col]] if col in rows.columns else []
        finite = [v for v in values if not math.isnan(v)]
        stats.mean[col] = sum(finite) / len(finite) if finite else math.nan
        stats.std[col] = (
            math.sqrt(sum((v - stats.mean[col]) ** 2 for v in finite) / (len(finite) - 1)) if len(finite) > 1 else 0.0
        )
    if "test/max_abs_viol" in rows.columns and len(rows):
        values = [_num(v) for v in rows["test/max_abs_viol"]]
        stats.max_abs_viol = max(values) if not any(math.isnan(v) for v in values) else math.nan
    return stats


def fmt(x: float, decimals: int) -> str:
    """Fixed decimals as the paper prints them; ``-0.00`` reads ``0.00``; NaN reads ``nan``."""
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    s = f"{x:.{decimals}f}"
    return s[1:] if re.fullmatch(r"-0\.0*", s) else s


def fmt_pair(mean: float, worst: float, decimals: int) -> str:
    """The paper's ``mean(worst)`` cell."""
    return f"{fmt(mean, decimals)}({fmt(worst, decimals)})"


def fmt_time(time_ms: float, iterations: float) -> str:
    """``time_ms(iterations)``: one decimal as the paper (two below 1 ms), iterations rounded."""
    t = fmt(time_ms, 2 if abs(time_ms) < 1 else 1)
    return t if math.isnan(iterations) else f"{t}({iterations:.0f})"


def fmt_sci(x: float) -> str:
    """Our exact worst absolute violation: ``0`` or two significant digits in scientific notation."""
    if math.isnan(x):
        return "nan"
    return "0" if x == 0 else f"{x:.1e}"


# --- the intermediate table -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    text: str
    bold: bool = False


@dataclass
class Block:
    title: str
    sizes: dict[str, str]
    """Our n, m_eq, m_ineq, k (several values joined by '/'); empty when we have no run."""
    paper_sizes: dict[str, int] | None
    notes: list[str]
    rows: list[list[Cell]]


@dataclass
class Table:
    name: str
    title: str
    caption: str
    columns: list[str]
    groups: list[tuple[str, int]]
    """LaTeX header: (group title, number of columns) over ``columns``."""
    blocks: list[Block]
    notes: list[str]


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
SEED_SPREAD_POINTS = 1.0
"""Per-seed mean gaps spreading wider than this many points (and ``SEED_SPREAD_SHARE``) mark the row's gap cell."""
SEED_SPREAD_SHARE = 0.25
"""... and wider than this share of the largest |per-seed gap|, so rows with large gaps of one sign are not marked."""
SEED_SPREAD_MARK = "†"
"""A dagger: plain in Markdown, ``\\dag{}`` in LaTeX (``_TEX_SPECIAL``)."""


def seed_gaps_disagree(gaps: Sequence[float]) -> bool:
    """Whether per-seed mean gaps spread so widely that their mean would mislead (see ``SEED_SPREAD_POINTS``)."""
    finite = [g for g in gaps if not math.isnan(g)]
    if len(finite) < 2:
        return False
    spread = max(finite) - min(finite)
    return spread > SEED_SPREAD_POINTS and spread > SEED_SPREAD_SHARE * max(abs(g) for g in finite)


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


def method_order(key: RowKey) -> tuple:
    """Sort key of rows of ours: ``METHOD_ORDER``, then name, variant, pre-trained before not."""
    rank = METHOD_ORDER.index(key.method) if key.method in METHOD_ORDER else len(METHOD_ORDER)
    return (rank, key.method, key.variant, key.pretrained is False)


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


# --- rendering ------------------------------------------------------------------------------------------
def _size_text(sizes: dict, tex: bool) -> str:
    names = {"n": "n", "m_eq": r"m_{\mathrm{eq}}" if tex else "m_eq", "m_ineq": r"m_{\mathrm{ineq}}" if tex else "m_ineq", "k": "k"}
    return ", ".join(f"{names[c]}={sizes[c]}" for c in ("n", "m_eq", "m_ineq", "k") if c in sizes)


def _block_header(block: Block, tex: bool) -> tuple[str, str]:
    """(title, sizes text): ours, and the paper's beside them when they differ or we have no run."""
    math_ = (lambda s: f"${s}$") if tex else (lambda s: s)
    ours = {k: str(v) for k, v in block.sizes.items()}
    theirs = {k: str(v) for k, v in (block.paper_sizes or {}).items()}
    if ours:
        text = math_(_size_text(ours, tex))
        if theirs and ours != theirs:
            text += " (paper: " + math_(_size_text(theirs, tex)) + ")"
    elif theirs:
        text = "paper: " + math_(_size_text(theirs, tex)) + " (no run of ours)"
    else:
        text = "no run of ours"
    for note in block.notes:
        text += f"; {tex_escape(note) if tex else note}"
    return block.title, text


def render_markdown(table: Table) -> str:
    """GitHub Markdown: one pipe table per block under a heading, notes at the end."""
    def cell(c: Cell) -> str:
        text = c.text.replace("|", "\\|")
        return f"**{text}**" if c.bold and text else text

    lines = [f"# {table.title}", "", table.caption, ""]
    align = ["---"] + ["--:" if c == "Seeds" else ":-:" for c in table.columns[1:]]
    for block in table.blocks:
        title, sizes = _block_header(block, tex=False)
        lines += [f"### {title}", "", sizes, ""]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in table.columns) + " |")
        lines.append("| " + " | ".join(align) + " |")
        lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in block.rows]
        lines.append("")
    lines.append("Notes:")
    lines += [f"- {n}" for n in table.notes]
    return "\n".join(lines) + "\n"


_TEX_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
    "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "|": r"\textbar{}", "<": r"\textless{}", ">": r"\textgreater{}",
    "†": r"\dag{}",
}


def tex_escape(text: str) -> str:
    """Escape LaTeX's special characters in plain text."""
    return "".join(_TEX_SPECIAL.get(ch, ch) for ch in text)


def _tex_column(name: str) -> str:
    short = name.replace(" (paper)", "")
    if name.endswith("(paper)"):
        return "paper"
    if name == "max |viol|":
        return r"$\max|\mathrm{viol}|$"
    if name in ("Method", "Seeds", "Penalty", "Selected (ours)", "Paper"):
        return r"\textbf{" + tex_escape(name) + "}"
    return "ours" if short in ("Gap %", "Eq. viol.", "Ineq. viol.", "Time ms") else tex_escape(name)


def render_latex(table: Table) -> str:
    """A booktabs ``table`` (needs ``booktabs`` and ``graphicx``); every text cell escaped."""
    ncol = len(table.columns)
    spec = "l" + "r" * (ncol - 1)
    lines = [
        f"% {table.name}: generated by hardlinear.reporting.tables from the results CSV; do not edit by hand.",
        r"\begin{table}[htbp]",
        r"  \centering",
        r"  \small",
        r"  \setlength{\tabcolsep}{3pt}",
        r"  \caption{" + tex_escape(table.caption) + "}",
        r"  \label{tab:ours_" + table.name + "}",
        r"  \resizebox{\textwidth}{!}{%",
        r"  \begin{tabular}{" + spec + "}",
        r"    \toprule",
    ]
    group_cells, rules, col = [], [], 1
    for title, width in table.groups:
        if title:
            group_cells.append(r"\multicolumn{" + str(width) + r"}{c}{\textbf{" + tex_escape(title) + "}}")
            rules.append(r"\cmidrule(lr){" + f"{col}-{col + width - 1}" + "}")
        else:
            group_cells += [""] * width
        col += width
    lines.append("    " + " & ".join(group_cells) + r" \\")
    if rules:
        lines.append("    " + " ".join(rules))
    lines.append("    " + " & ".join(_tex_column(c) for c in table.columns) + r" \\")
    for block in table.blocks:
        title, sizes = _block_header(block, tex=True)
        lines.append(r"    \midrule")
        lines.append(r"    \multicolumn{" + str(ncol) + r"}{c}{\textbf{" + tex_escape(title) + ":} " + sizes + r"}\\")
        lines.append(r"    \midrule")
        for row in block.rows:
            cells = [(r"\textbf{" + tex_escape(c.text) + "}") if c.bold and c.text else tex_escape(c.text) for c in row]
            lines.append("    " + " & ".join(cells) + r" \\")
    lines += [r"    \bottomrule", r"  \end{tabular}}", r"  \par\smallskip\footnotesize"]
    lines += ["  " + tex_escape(n) + r"\par" for n in table.notes]
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


# --- entry point ----------------------------------------------------------------------------------------
NO_RESULT_STATUSES = ("skipped", "failed", "not_applicable", "superseded")
"""Statuses of runs without metrics: their reasons fill rows that have no run ("not run: ...")."""


def make_tables(
    results, out_dir: str | Path, study: str | None = None, where: dict | None = None,
) -> dict[str, Path]:
    """Write the tables the study has runs for as ``<out_dir>/<table>.md`` and ``.tex``; returns ``{"<table>.md": path, ...}``.

    ``results``: the results roots (directories of records and/or legacy results CSVs; see
    ``hardlinear.harness.results.load_records``) or an already loaded table. ``study`` and ``where`` select the runs;
    a cell whose runs differ in a setting other than the seed raises ``MixedSettings`` naming the keys.
    A table none of whose problems the study ran (a DC3-benchmark study has none of the paper's) is not written,
    and an older rendering of it in ``out_dir`` is removed, so the folder never shows a table of "not run" rows
    as if it were the study's.
    """
    from hardlinear.harness.results import report_table

    df = report_table(results, study=study, where=where)
    ran = set(df["problem"].astype(str)) if "problem" in df.columns else set()
    penalty_ran = "experiment" in df.columns and bool((df["experiment"].astype(str) == PENALTY_EXPERIMENT).any())
    skipped = df[df["status"].isin(NO_RESULT_STATUSES)]
    df = df[~df["status"].isin(NO_RESULT_STATUSES)]
    out_dir = Path(out_dir)
    tables = [build_table(spec, df, skipped) for spec in TABLES.values() if ran & {b.problem for b in spec.blocks}]
    if penalty_ran:
        tables.append(build_penalty_table(df, skipped))
    kept = {table.name for table in tables}
    for name in set(TABLE_NAMES) - kept:
        for suffix in (".md", ".tex"):
            (out_dir / f"{name}{suffix}").unlink(missing_ok=True)
    if tables:
        out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for table in tables:
        for suffix, render in ((".md", render_markdown), (".tex", render_latex)):
            path = out_dir / f"{table.name}{suffix}"
            path.write_text(render(table))
            written[path.name] = path
    return written
