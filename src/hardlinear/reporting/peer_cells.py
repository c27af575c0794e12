"""One row of the peers table from the records of one group (a problem, a method, its variant, its schedule):
aggregation over seeds and formatting. Records are the dicts of ``load_records`` (``cfg.*`` keys flattened).

A group never mixes schedules (epochs, pre-training, learning rate, batch, budget) or variants: ``group_key``
keeps them apart, so a mean is always over seeds of one configuration.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

NOT_RUN = "not run (compute)"
REFINED = "proposed (refined)"
SCHEDULE_KEYS = (
    "name", "epochs", "pretrain_epochs", "lr", "batch_size", "sampling", "batches_per_epoch", "time_budget_s",
)  # fmt: skip

Record = Mapping[str, Any]


def num(value: Any) -> float:
    """A float, NaN for anything that is not a number (missing keys, None, text)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def text(value: Any) -> str:
    """A string, '' for missing values (None, NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def fmt(x: float, kind: str = "g") -> str:
    if x is None or not math.isfinite(x):
        return "—"
    return {"e": f"{x:.1e}", "int": f"{x:,.0f}", "f2": f"{x:.2f}", "g4": f"{x:.4g}"}.get(kind, f"{x:.3g}")


def finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if math.isfinite(v)]


def mean_sd(values: Sequence[float], kind: str = "g") -> str:
    vals = finite(values)
    if not vals:
        return "—"
    mean = sum(vals) / len(vals)
    if len(vals) == 1:
        return fmt(mean, kind)
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))
    return f"{fmt(mean, kind)} ± {fmt(sd, kind)}"


def mean(values: Sequence[float]) -> float:
    vals = finite(values)
    return sum(vals) / len(vals) if vals else math.nan


def worst(values: Sequence[float]) -> float:
    vals = finite(values)
    return max(vals) if vals else math.nan


def median(values: Sequence[float]) -> float:
    vals = sorted(finite(values))
    if not vals:
        return math.nan
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else 0.5 * (vals[mid - 1] + vals[mid])


def slot_of(row: Record) -> str:
    """The table's method slot: the method's name, or ``proposed (refined)`` for the proposed layer with a
    refinement before the blend (``method.refine`` other than none; records before issue 60 name ``method=proposed_refined``
    runs ``proposed``, later ones ``proposed_refined``)."""
    method = text(row.get("method"))
    if method in ("proposed", "proposed_refined") and text(row.get("cfg.method.refine")) not in ("", "none"):
        return REFINED
    return method


def schedule_of(row: Record) -> tuple:
    """What the run was trained on: the trainer's name, epochs, pre-training, lr, batch, budget."""
    return tuple(text(row.get(f"cfg.trainer.{k}")) for k in SCHEDULE_KEYS)


def group_key(row: Record) -> tuple:
    """Rows with one key are seeds of one configuration in one study; anything else is a row of its own (two
    studies' runs of one configuration are replicates of the same seeds, not more seeds)."""
    return (text(row.get("variant")), text(row.get("form")), schedule_of(row), text(row.get("study")))


def trained(row: Record) -> bool:
    """False for a method that trained nothing (a solver without a warm-start network)."""
    done = num(row.get("train/epochs"))
    return done > 0 if math.isfinite(done) else num(row.get("train/time_s")) > 0


def schedule_text(row: Record) -> str:
    """``default 100 ep. (20 pre), lr 0.0001, batch 64 x 20, 120 s budget``: the schedule a run had (``one pass
    an epoch`` for ``sampling=pass``, the authors' epochs over a fixed training set)."""
    if not trained(row):
        return "no training"
    s = {k: row.get(f"cfg.trainer.{k}") for k in SCHEDULE_KEYS}
    out = text(s["name"])
    if math.isfinite(num(s["epochs"])):
        out += f" {num(s['epochs']):g} ep."
    if num(s["pretrain_epochs"]) > 0:
        out += f" ({num(s['pretrain_epochs']):g} pre)"
    if math.isfinite(num(s["lr"])):
        out += f", lr {num(s['lr']):g}"
    if math.isfinite(num(s["batch_size"])):
        if text(s["sampling"]) == "pass":
            per = ", one pass an epoch"
        else:
            per = f" x {num(s['batches_per_epoch']):g}" if math.isfinite(num(s["batches_per_epoch"])) else ""
        out += f", batch {num(s['batch_size']):g}{per}"
    if math.isfinite(num(s["time_budget_s"])):
        out += f", {num(s['time_budget_s']):g} s budget"
    return out


def epochs_trained(row: Record) -> float:
    """The record's ``train/epochs`` (budgeted runs stop early), else the schedule's; 0 without training."""
    if not trained(row):
        return 0.0
    done = num(row.get("train/epochs"))
    return done if math.isfinite(done) else num(row.get("cfg.trainer.epochs"))


def label(slot: str, key: tuple, keys: Sequence[tuple]) -> str:
    """``hardnet_aff``, ``proposed (refined) [refine=dr(10/50 steps, sigma=0.3) rule=cost0.5]``; the form and
    the study are named when the slot's rows differ in them."""
    variant, form, _, study = key
    out = f"{slot} [{variant}]" if variant else slot
    if len({k[1] for k in keys}) > 1:
        out += f" ({form} form)"
    if len({k[3] for k in keys}) > 1:
        out += f" (study {study})"
    return out


def seeds_of(rows: Sequence[Record]) -> list[int]:
    return sorted({int(num(r["seed"])) for r in rows if math.isfinite(num(r.get("seed")))})


def metric_cells(rows: Sequence[Record]) -> dict[str, str]:
    """The accuracy and feasibility cells of ok records: means over seeds (± sd) and worst over seeds."""
    get = lambda key: [num(r.get(key)) for r in rows]  # noqa: E731
    return {
        "train s": mean_sd(get("train/time_s"), "int"),
        "objective": mean_sd(get("test/objective_mean"), "g4"),
        "gap mean %": mean_sd(get("test/gap_mean")),
        "gap worst %": fmt(worst(get("test/gap_worst"))),
        "eq. rel. mean": fmt(mean(get("test/eq_viol_mean")), "e"),
        "eq. rel. worst": fmt(worst(get("test/eq_viol_worst")), "e"),
        "ineq. rel. mean": fmt(mean(get("test/ineq_viol_mean")), "e"),
        "ineq. rel. worst": fmt(worst(get("test/ineq_viol_worst")), "e"),
        "eq. abs. mean": fmt(mean(get("test/eq_max_mean")), "e"),
        "ineq. abs. mean": fmt(mean(get("test/ineq_max_mean")), "e"),
        "abs. worst": fmt(worst(get("test/max_abs_viol")), "e"),
        "in-run batch-1 ms (loaded)": fmt(median(get("test/time_ms")), "f2"),
    }


def status_groups(rows: Sequence[Record], seeds: Sequence[int], note: str) -> list[tuple[str, list[int], list[Record]]]:
    """``(status text, seeds, ok records)`` per line of a group: one ``ok`` line aggregating the seeds that ran
    (missing seeds named in it), one line per not-applicable / failed reason, and ``not run`` for seeds without
    any record when nothing ran."""
    ok = [r for r in rows if text(r.get("status")) == "ok"]
    missing = [s for s in seeds if s not in seeds_of(rows)]
    out: list[tuple[str, list[int], list[Record]]] = []
    if ok:
        word = "seed" if len(missing) == 1 else "seeds"
        status = "ok" if not missing else f"ok; **{word} {','.join(map(str, missing))}: {note}**"
        out.append((status, seeds_of(ok), ok))
        missing = []
    for status in ("not_applicable", "diverged", "failed", "skipped"):
        group = [r for r in rows if text(r.get("status")) == status]
        name = "not applicable" if status == "not_applicable" else status
        for reason in sorted({text(r.get("reason")) for r in group}):
            out.append((f"{name}: {reason}", seeds_of([r for r in group if text(r.get("reason")) == reason]), []))
    if missing:
        out.append((f"**{note}**", missing, []))
    return out
