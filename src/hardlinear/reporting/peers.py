"""The peer-methods table (issue 19): our runs of study ``table_peers`` per problem and method, aggregated over
seeds, with the peers' published figures beside them (``data/peer_published.csv``).

Every (problem, method, seed) of the planned sweep appears: aggregated when it ran, ``not applicable: <reason>``
when the method raised ``NotApplicable``, the status and reason when it failed or diverged, and ``not run`` (with
the caller's reason) when no record exists, so a missing run can never read as a method left out. Epochs and
seconds per epoch are columns because the methods do not train on equal budgets (the projection layer runs
under a wall-clock budget; DC3's and HardNet's problem-method configs use their authors' schedules).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

PROBLEMS: tuple[str, ...] = ("dc3_qp", "dc3_nonconvex", "dcopf_14", "dcopf_57", "dcopf_118", "portfolio")
METHODS: tuple[str, ...] = ("proposed", "hardnet_aff", "projection_layer", "gauge", "dc3", "optimizer")
SEEDS: tuple[int, ...] = (0, 1, 2)
NOT_RUN = "not run (compute)"

COLUMNS = (
    "method", "status", "seeds", "schedule", "epochs", "s / epoch", "train s", "objective", "gap mean %",
    "gap worst %", "eq. worst", "ineq. worst", "batch-1 ms", "throughput / s",
)


def load_published(path=None) -> list[dict[str, str]]:
    """The published peer figures (``reporting/data/peer_published.csv``: problem, method, objective, ... source)."""
    if path is None:
        text = resources.files("hardlinear.reporting").joinpath("data/peer_published.csv").read_text()
    else:
        text = open(path).read()
    return list(csv.DictReader(text.splitlines()))


def _num(value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out


def _fmt(x: float, kind: str = "g") -> str:
    if x is None or not math.isfinite(x):
        return "—"
    if kind == "e":
        return f"{x:.1e}"
    if kind == "int":
        return f"{x:,.0f}"
    if kind == "f2":
        return f"{x:.2f}"
    if kind == "g4":
        return f"{x:.4g}"
    return f"{x:.3g}"


def _mean_sd(values: Sequence[float], kind: str = "g") -> str:
    vals = [v for v in values if math.isfinite(v)]
    if not vals:
        return "—"
    mean = sum(vals) / len(vals)
    if len(vals) == 1:
        return _fmt(mean, kind)
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))
    return f"{_fmt(mean, kind)} ± {_fmt(sd, kind)}"


def _max(values: Sequence[float]) -> float:
    vals = [v for v in values if math.isfinite(v)]
    return max(vals) if vals else math.nan


def _median(values: Sequence[float]) -> float:
    vals = sorted(v for v in values if math.isfinite(v))
    if not vals:
        return math.nan
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else 0.5 * (vals[mid - 1] + vals[mid])


def _schedule(row: Mapping[str, Any]) -> str:
    """The training schedule a run had: the trainer's name, its epochs, its wall-clock budget when it had one."""
    budget = _num(row.get("cfg.trainer.time_budget_s"))
    epochs = _num(row.get("cfg.trainer.epochs"))
    name = str(row.get("cfg.trainer.name") or "")
    text = f"{name} {int(epochs)} ep." if math.isfinite(epochs) else name
    if math.isfinite(budget):
        text += f", {budget:g} s budget"
    return text


def _epochs(row: Mapping[str, Any]) -> float:
    """Epochs trained: the record's ``train/epochs`` when it has one (budgeted runs), else the schedule's; 0 for a
    method that trained nothing (a solver without a warm-start network)."""
    done = _num(row.get("train/epochs"))
    if math.isfinite(done):
        return done
    if not _num(row.get("train/time_s")) > 0:
        return 0.0
    return _num(row.get("cfg.trainer.epochs"))


def _per_instance(rows: Sequence[Mapping[str, Any]]) -> bool:
    """True when throughput is ``1000 / batch-1 ms`` (methods that cannot batch: a solve per instance)."""
    pairs = [(_num(r.get("test/throughput")), _num(r.get("test/time_ms"))) for r in rows]
    pairs = [(t, ms) for t, ms in pairs if math.isfinite(t) and math.isfinite(ms) and ms > 0]
    return bool(pairs) and all(abs(t * ms / 1000.0 - 1.0) < 1e-9 for t, ms in pairs)


def _ok_row(method: str, rows: Sequence[Mapping[str, Any]], missing: Sequence[int], missing_note: str) -> list[str]:
    seeds = sorted(int(_num(r["seed"])) for r in rows)
    seed_text = ",".join(map(str, seeds))
    word = "seed" if len(missing) == 1 else "seeds"
    status = "ok" if not missing else f"ok; **{word} {','.join(map(str, missing))}: {missing_note}**"
    epochs = [_epochs(r) for r in rows]
    schedules = sorted({_schedule(r) if e > 0 else "no training" for r, e in zip(rows, epochs)})
    per_epoch = [_num(r.get("train/epoch_time_s")) for r in rows]
    throughput = _fmt(_median([_num(r.get("test/throughput")) for r in rows]), "int")
    if _per_instance(rows) and throughput != "—":
        throughput += " (1/batch-1)"
    return [
        method, status, seed_text, "; ".join(schedules), _mean_sd(epochs, "g4") if any(e > 0 for e in epochs) else "—",
        _mean_sd(per_epoch, "f2"), _mean_sd([_num(r.get("train/time_s")) for r in rows], "int"),
        _mean_sd([_num(r.get("test/objective_mean")) for r in rows], "g4"),
        _mean_sd([_num(r.get("test/gap_mean")) for r in rows]),
        _fmt(_max([_num(r.get("test/gap_worst")) for r in rows])),
        _fmt(_max([_num(r.get("test/eq_viol_worst")) for r in rows]), "e"),
        _fmt(_max([_num(r.get("test/ineq_viol_worst")) for r in rows]), "e"),
        _fmt(_median([_num(r.get("test/time_ms")) for r in rows]), "f2"),
        throughput,
    ]


def _status_row(method: str, text: str, seeds: Sequence[int]) -> list[str]:
    return [method, text, ",".join(map(str, seeds)) or "—"] + ["—"] * (len(COLUMNS) - 3)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def method_rows(
    rows: Sequence[Mapping[str, Any]],
    method: str,
    seeds: Sequence[int] = SEEDS,
    missing_note: str = NOT_RUN,
) -> list[list[str]]:
    """Table rows of one method on one problem from its records ``rows`` (any statuses)."""
    by_status: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_status.setdefault(str(r.get("status")), []).append(r)
    have = {int(_num(r["seed"])) for r in rows if math.isfinite(_num(r.get("seed")))}
    missing = [s for s in seeds if s not in have]
    out: list[list[str]] = []
    if by_status.get("ok"):
        out.append(_ok_row(method, by_status["ok"], missing, missing_note))
        missing = []
    for status in ("not_applicable", "diverged", "failed", "skipped"):
        group = by_status.get(status, [])
        if not group:
            continue
        label = "not applicable" if status == "not_applicable" else status
        for reason in sorted({str(r.get("reason") or "") for r in group}):
            same = sorted(int(_num(r["seed"])) for r in group if str(r.get("reason") or "") == reason)
            out.append(_status_row(method, f"{label}: {reason}", same))
    if missing:
        out.append(_status_row(method, f"**{missing_note}**", missing))
    return out


def published_rows(published: Sequence[Mapping[str, str]], problem: str, refs: dict[str, int]) -> list[list[str]]:
    """Published figures for ``problem`` (rows whose problem starts with its name), each citing its source."""
    out = []
    for p in published:
        if not str(p.get("problem", "")).startswith(problem + " "):
            continue
        ref = refs.setdefault(p["source"], len(refs) + 1)
        verified = "" if str(p.get("verified", "yes")) == "yes" else ", unverified"
        status = f"published [{ref}]{verified}: {p['problem']}"
        if p.get("test_time"):  # their own timing protocol, not batch-1: kept out of our timing columns
            status += f"; test time {p['test_time']} {p.get('test_time_unit') or ''}".rstrip()
        row = [
            f"{p['method']} (published)", status, "—", "—", "—", "—",
            p.get("train_time_s") or "—", p.get("objective_value") or "—", "—", "—",
            p.get("max_eq_viol") or "—", p.get("max_ineq_viol") or "—", "—", "—",
        ]
        out.append(row)
    return out


def peers_table(
    records: Sequence[Mapping[str, Any]],
    published: Sequence[Mapping[str, str]] = (),
    problems: Sequence[str] = PROBLEMS,
    methods: Sequence[str] = METHODS,
    seeds: Sequence[int] = SEEDS,
    missing_notes: Mapping[tuple[str, str], str] | None = None,
    header: str = "",
) -> str:
    """Markdown: one table per problem (rows: methods, then the published figures), then the sources.

    ``records``: rows of ``load_records`` (dicts with ``cfg.problem.name``, ``method``, ``seed``, ``status``,
    metrics). ``missing_notes``: ``{(problem, method): text}`` said of seeds with no record (default ``NOT_RUN``).
    """
    missing_notes = dict(missing_notes or {})
    refs: dict[str, int] = {}
    lines = [header.rstrip(), ""] if header else []
    for problem in problems:
        mine = [r for r in records if str(r.get("cfg.problem.name")) == problem]
        sizes = next((r for r in mine if math.isfinite(_num(r.get("n")))), None)
        title = f"### {problem}"
        if sizes is not None:
            title += f" (`{sizes.get('problem')}`, {sizes.get('form')} form: n = {int(_num(sizes['n']))}, "
            title += f"{int(_num(sizes['m_eq']))} equalities, {int(_num(sizes['m_ineq']))} inequalities)"
        lines += [title, "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        for method in methods:
            rows = [r for r in mine if str(r.get("method")) == method]
            note = missing_notes.get((problem, method), NOT_RUN)
            for row in method_rows(rows, method, seeds, note):
                lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
        for row in published_rows(published, problem, refs):
            lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
        lines.append("")
    if refs:
        lines += ["Sources of the published rows:", ""]
        for source, k in sorted(refs.items(), key=lambda kv: kv[1]):
            lines.append(f"{k}. {source}")
        lines.append("")
        flagged = [p for p in published if str(p.get("verified", "yes")) != "yes" and p["source"] in refs]
        for p in flagged:
            lines.append(f"- unverified: {p['problem']} / {p['method']}: {p.get('note', '')}")
        if flagged:
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"
