"""From the runs of one table row to its figures: which runs (one per seed, one setting), their means, and
how numbers are printed.

Free of any table's layout, so that a table of any study can use them: ``row_key`` / ``with_keys`` / ``of_key``
group results rows by ``RowKey``; ``one_per_seed`` keeps one run per seed and refuses (``MixedSettings``) runs
that differ in a setting other than the seed; ``summarize`` gives means and standard deviations over seeds
(``Stats``); ``seed_gaps_disagree`` says when such a mean would hide seeds that landed in different places;
``fmt``, ``fmt_pair``, ``fmt_time`` and ``fmt_sci`` print numbers as the paper's tables do.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from hardlinear.reporting.labels import PRETRAINED_METHODS, RowKey, method_label, method_order


# --- runs of a row ----------------------------------------------------------------------------------------
@dataclass
class Stats:
    """Our figures for one table row: means (and standard deviations) over seeds."""

    seeds: int
    mean: dict[str, float] = field(default_factory=dict)
    std: dict[str, float] = field(default_factory=dict)
    max_abs_viol: float = math.nan
    worst: dict[str, float] = field(default_factory=dict)
    """The largest value over seeds of each metric (a ``..._worst`` metric's: the worst over every test instance of
    every seed, what the study table's "(worst)" shows)."""


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


METHOD_OPTION = "method."
"""Config keys of the method's own options: they differ between methods by design, so they label a row only where
runs of one method differ in them (the trainer's, the network's and every other key label it wherever rows differ)."""


def differing_keys(block) -> list[str]:
    """The settings (dotted config keys, no ``method.`` option) in which the runs of a block (one problem, every
    method) differ: what a reader must see beside each row, or a gain of the trainer reads as the method's."""
    return sorted(k for k in mixed_settings(block) if not k.startswith(METHOD_OPTION))


def rows_by_setting(block) -> list[tuple[RowKey, str, object]]:
    """``(RowKey, setting, runs)`` per row of one block, in the tables' method order: a method whose runs differ in a
    setting other than the seed (a learning-rate sweep) gets one row per setting, never a mean of both; ``setting``
    (``"trainer.lr=0.001, network.batch_norm=false"``) names the row's value of every key of ``differing_keys(block)``
    and of the method options in which that method's runs differ ("" when nothing differs)."""
    from hardlinear.harness.results import CONFIG_PREFIX, _canon

    block = block if "_key" in block.columns else with_keys(block)
    shared = differing_keys(block)
    out = []
    for key in sorted(set(block["_key"]), key=method_order):
        runs = of_key(block, key)
        keys = shared + sorted(k for k in mixed_settings(runs) if k not in shared)
        if not keys:
            out.append((key, "", runs))
            continue
        labels = [", ".join(f"{k}={_canon(r[CONFIG_PREFIX + k]).strip(chr(34))}" for k in keys
                            if not _missing(r.get(CONFIG_PREFIX + k))) for r in runs.to_dict("records")]
        for setting in sorted(set(labels)):
            out.append((key, setting, runs[[lab == setting for lab in labels]]))
    return out


def row_label(key: RowKey, setting: str) -> str:
    """A row's label: the method's (``method_label``), then its setting in brackets where rows differ in one."""
    return method_label(key) + (f" [{setting}]" if setting else "")


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
        stats.worst[col] = max(finite) if finite else math.nan
        stats.std[col] = (
            math.sqrt(sum((v - stats.mean[col]) ** 2 for v in finite) / (len(finite) - 1)) if len(finite) > 1 else 0.0
        )
    if "test/max_abs_viol" in rows.columns and len(rows):
        values = [_num(v) for v in rows["test/max_abs_viol"]]
        stats.max_abs_viol = max(values) if not any(math.isnan(v) for v in values) else math.nan
    return stats


# --- seeds that disagree -----------------------------------------------------------------------------------
SEED_SPREAD_POINTS = 1.0
"""Per-seed mean gaps spreading wider than this many points (and ``SEED_SPREAD_SHARE``) mark the row's gap cell."""
SEED_SPREAD_SHARE = 0.25
"""... and wider than this share of the largest |per-seed gap|, so rows with large gaps of one sign are not marked."""


def seed_gaps_disagree(gaps: Sequence[float]) -> bool:
    """Whether per-seed mean gaps spread so widely that their mean would mislead (see ``SEED_SPREAD_POINTS``)."""
    finite = [g for g in gaps if not math.isnan(g)]
    if len(finite) < 2:
        return False
    spread = max(finite) - min(finite)
    return spread > SEED_SPREAD_POINTS and spread > SEED_SPREAD_SHARE * max(abs(g) for g in finite)


# --- numbers as printed ------------------------------------------------------------------------------------
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


def epochs_text(done: Sequence[float], budget_spent: Sequence[object] = ()) -> str:
    """What the seeds of a row trained: ``300``, ``13-14`` (seeds differ), or ``stopped on its budget after 13
    epochs`` when a wall-clock budget (``trainer.time_budget_s``) ended training: the epochs it completed, never a
    fraction (a record's ``train/epochs`` counts the cut epoch's share of batches: 13.2)."""
    runs = [(float(d), bool(b) and not (isinstance(b, float) and math.isnan(b))) for d, b in
            zip(done, list(budget_spent) + [False] * (len(done) - len(budget_spent))) if not math.isnan(_num(d))]
    if not runs:
        return "nan"
    stopped = [math.floor(d) for d, b in runs if b]
    values = stopped or [d for d, _ in runs]
    low, high = min(values), max(values)
    span = f"{low:g}" if low == high else f"{low:g}-{high:g}"
    if not stopped:
        return span
    seeds = "" if len(stopped) == len(runs) else f" ({len(stopped)} of {len(runs)} seeds)"
    return f"stopped on its budget after {span} epoch{'' if span == '1' else 's'}{seeds}"


def fmt_sci(x: float) -> str:
    """Our exact worst absolute violation: ``0`` or two significant digits in scientific notation."""
    if math.isnan(x):
        return "nan"
    return "0" if x == 0 else f"{x:.1e}"
