"""The peer-methods table (issues 19 and 28): our runs per problem and method, aggregated over seeds, with the
peers' published figures only where they are on the same instances and test inputs.

Sections: one block per problem (every method slot, refined proposed as its own slot; one row per variant and
schedule, never a mean across them); DC3's nine QP datasets (compact); Pinet's published figures, on the same
problem but its own test split; other instances' published figures, not comparable row by row. Every planned
(problem, method, seed) appears: aggregated when it ran, ``not applicable: <reason>``, a failure with its reason,
or ``not run`` when no record exists, so a missing run never reads as a method left out. Latency and throughput
come only from ``benchmarks/bench_methods.py`` output (:mod:`peer_timings`); a row without one says so.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from typing import Any

from hardlinear.reporting import peer_cells as pc
from hardlinear.reporting.peer_cells import NOT_RUN, REFINED, Record
from hardlinear.reporting.peer_timings import Timing, timing_for
from hardlinear.reporting.stats import epochs_text

PROBLEMS: tuple[str, ...] = ("dc3_qp", "dc3_nonconvex", "dcopf_14", "dcopf_57", "dcopf_118", "portfolio")
INSTANCES = {"dc3_qp": "dc3_qp_eq50_ineq50", "dc3_nonconvex": "dc3_nonconvex_eq50_ineq50"}
METHODS: tuple[str, ...] = (
    "proposed", REFINED, "ldr", "pinet", "fsnet", "hardnet_aff", "projection_layer", "gauge", "dc3", "optimizer",
)
SEEDS: tuple[int, ...] = (0, 1, 2)
DC3_QP_DATASETS: tuple[tuple[int, int], ...] = (
    (10, 50), (30, 50), (50, 50), (70, 50), (90, 50), (50, 10), (50, 30), (50, 70), (50, 90),
)  # fmt: skip
DATASET_METHODS: tuple[str, ...] = ("proposed", REFINED, "pinet", "fsnet", "hardnet_aff")

COLUMNS = (
    "method", "status", "seeds", "schedule", "epochs", "train s", "objective", "gap mean %", "gap worst %",
    "eq. rel. mean", "eq. rel. worst", "ineq. rel. mean", "ineq. rel. worst", "eq. abs. mean", "ineq. abs. mean",
    "abs. worst", "batch-1 ms", "batch-1024 / s", "in-run batch-1 ms (loaded)",
)  # fmt: skip
COMPACT = (
    "dataset", "method", "status", "seeds", "schedule", "gap mean %", "gap worst %", "eq. rel. worst",
    "ineq. rel. worst", "abs. worst", "train s",
)  # fmt: skip
NO_TIMING = "—¹"
TimingLookup = Callable[[Sequence[Record], str], "Timing | None"]  # (ok records of a row, variant) -> its timing


def _data(name: str, path=None) -> list[dict[str, str]]:
    text = resources.files("hardlinear.reporting").joinpath(f"data/{name}").read_text() if path is None else open(path).read()
    return list(csv.DictReader(text.splitlines()))


def load_published(path=None) -> list[dict[str, str]]:
    """Published peer figures (``data/peer_published.csv``); ``same_instance = yes`` marks those on our instances
    and test inputs (the only ones placed in a problem's block)."""
    return _data("peer_published.csv", path)


def load_pinet_readme_figures(path=None) -> list[dict[str, str]]:
    """Pinet's README figures read by eye (``data/pinet_readme_figures.csv``): DC3's nonconvex problem, Pinet's own
    test split. Its committed result files are ``data/pinet_published.csv`` (:mod:`pinet_published`)."""
    return _data("pinet_readme_figures.csv", path)


def _line(cells: Sequence[Any]) -> str:
    return "| " + " | ".join(" ".join(str(c).split()).replace("|", "\\|") for c in cells) + " |"


def _head(columns: Sequence[str]) -> list[str]:
    return [_line(columns), "|" + "---|" * len(columns)]


def slot_rows(
    records: Sequence[Record], slot: str, seeds: Sequence[int] = SEEDS, note: str = NOT_RUN,
    timing: TimingLookup | None = None,
) -> list[dict[str, str]]:
    """Table rows (column -> cell) of one method slot on one instance: a row per (variant, form, schedule) and
    status, or one ``not run`` row when the slot has no record at all."""
    groups: dict[tuple, list[Record]] = {}
    for r in records:
        groups.setdefault(pc.group_key(r), []).append(r)
    if not groups:
        return [{"method": slot, "status": f"**{note}**", "seeds": ",".join(map(str, seeds))}]
    out = []
    for key in sorted(groups, key=lambda k: (-len(pc.seeds_of(groups[k])), k[2], k[0], k[1], k[3])):
        rows = groups[key]
        name = pc.label(slot, key, list(groups))
        for status, seeds_done, ok in pc.status_groups(rows, seeds, note):
            row = {"method": name, "status": status, "seeds": ",".join(map(str, seeds_done)) or "—"}
            if ok:
                epochs = [pc.epochs_trained(r) for r in ok]
                row.update(pc.metric_cells(ok))
                row["schedule"] = "; ".join(sorted({pc.schedule_text(r) for r in ok}))
                row["epochs"] = epochs_text(epochs, [r.get("train/budget_spent") for r in ok]) if any(e > 0 for e in epochs) else "—"
                found = timing(ok, key[0]) if timing is not None else None
                row["batch-1 ms"], row["batch-1024 / s"] = found.cells() if found else (NO_TIMING, NO_TIMING)
            out.append(row)
    return out


def _problem_title(problem: str, mine: Sequence[Record]) -> str:
    sizes = next((r for r in mine if pc.num(r.get("n")) > 0), None)
    if sizes is None:
        return f"### {problem}"
    return (f"### {problem} (`{sizes.get('problem')}`, {sizes.get('form')} form: n = {int(pc.num(sizes['n']))}, "
            f"{int(pc.num(sizes['m_eq']))} equalities, {int(pc.num(sizes['m_ineq']))} inequalities)")  # fmt: skip


def _cite(p: Mapping[str, str], refs: dict[str, int]) -> str:
    ref = refs.setdefault(p["source"], len(refs) + 1)
    return f"[{ref}]" + ("" if str(p.get("verified", "yes")) == "yes" else ", unverified")


def same_instance(p: Mapping[str, str], problem: str) -> bool:
    """A published row that belongs in ``problem``'s block: its instance and test inputs are ours."""
    return str(p.get("problem", "")).startswith(problem + " ") and str(p.get("same_instance", "")).strip() == "yes"


def published_rows(published: Sequence[Mapping[str, str]], problem: str, refs: dict[str, int]) -> list[dict[str, str]]:
    """Published figures on ``problem``'s own instances and test inputs, each citing its source."""
    out = []
    for p in published:
        if not same_instance(p, problem):
            continue
        status = f"published {_cite(p, refs)}: {p['problem']}"
        if p.get("test_time"):  # their own timing protocol, kept out of our timing columns
            status += f"; test time {p['test_time']} {p.get('test_time_unit') or ''}".rstrip()
        out.append({
            "method": f"{p['method']} (published)", "status": status, "train s": p.get("train_time_s") or "—",
            "objective": p.get("objective_value") or "—", "eq. abs. mean": p.get("max_eq_viol") or "—",
            "ineq. abs. mean": p.get("max_ineq_viol") or "—",
        })
    return out


def _block(
    problem: str, mine: Sequence[Record], methods: Sequence[str], seeds: Sequence[int], notes: Mapping,
    timing: Sequence[Mapping[str, Any]] | None, published: Sequence[Mapping[str, str]], refs: dict[str, int],
) -> list[str]:
    """One problem's table: every method slot's rows, its same-instance published rows, the timing footnote."""
    lines = [_problem_title(problem, mine), "", *_head(COLUMNS)]
    untimed = []
    lookup = None
    if timing is not None:
        lookup = lambda ok, variant: timing_for(ok, problem, pc.text(ok[0].get("method")), variant, timing)  # noqa: E731
    for slot in methods:
        note = notes.get((problem, slot), NOT_RUN)
        for row in slot_rows([r for r in mine if pc.slot_of(r) == slot], slot, seeds, note, lookup):
            lines.append(_line(row.get(c, "—") for c in COLUMNS))
            if row.get("batch-1 ms") == NO_TIMING:
                untimed.append(row["method"])
    lines += [_line(row.get(c, "—") for c in COLUMNS) for row in published_rows(published, problem, refs)]
    if untimed and timing is None:
        lines += ["", "¹ No `--timings` given: nothing on this problem was timed in one process (see the header)."]
    elif untimed:
        lines += ["", f"¹ No `bench_methods.py` timing of {', '.join(dict.fromkeys(untimed))} on this problem in "
                  "`--timings`: not timed in the problem's one process (the in-run column is the run's own timing, "
                  "taken on a loaded machine)."]  # fmt: skip
    return lines + [""]


def compact_rows(records: Sequence[Record], datasets: Sequence[tuple[str, str]], methods: Sequence[str], seeds, note: str) -> list[str]:
    """``dataset x method`` lines: gap mean and worst, worst violations, training time."""
    lines = _head(COMPACT)
    for label, instance in datasets:
        mine = [r for r in records if pc.text(r.get("problem")) == instance]
        for slot in methods:
            for row in slot_rows([r for r in mine if pc.slot_of(r) == slot], slot, seeds, note):
                lines.append(_line({"dataset": label, **row}.get(c, "—") for c in COMPACT))
    return lines + [""]


def dc3_qp_datasets_section(records: Sequence[Record], seeds=SEEDS, methods=DATASET_METHODS) -> list[str]:
    datasets = [(f"{e} eq. / {i} ineq.", f"dc3_qp_eq{e}_ineq{i}") for e, i in DC3_QP_DATASETS]
    return [
        "## DC3's nine QP datasets (`problem=dc3_qp problem.num_eq=E problem.num_ineq=I`)", "",
        "DC3's 833 test inputs of each dataset; one row per variant and schedule, as above.", "",
        *compact_rows(records, datasets, methods, seeds, NOT_RUN),
    ]  # fmt: skip


def pinet_section(records: Sequence[Record], pinet_published: Sequence[Mapping[str, str]], refs: dict[str, int], seeds=SEEDS) -> list[str]:
    """Pinet's figures, with our runs on its split when any were loaded: same problems as DC3's, other test inputs."""
    lines = [
        "## Pinet's published figures: DC3's problems, Pinet's test split (not DC3's 833 test inputs)", "",
        "Pinet tests on the last 1,024 rows of DC3's inputs, not on DC3's 833 test inputs that every block above uses, "
        "so these figures are not rows of those blocks. Our runs under Pinet's split (`problem.split=pinet`, instances "
        "`*_pinetsplit`) sit below them when loaded.", "",
        *_head(("problem", "statistic", "low", "centre", "high", "unit", "split", "how obtained", "source")),
    ]  # fmt: skip
    for p in pinet_published:
        lines.append(_line([p["problem"], p["statistic"], p["low"], p["centre"], p["high"], p["unit"], p["split"],
                            p["how_obtained"], _cite(p, refs)]))  # fmt: skip
    split = sorted({pc.text(r.get("problem")) for r in records if pc.text(r.get("problem")).endswith("_pinetsplit")})
    if split:
        methods = list(dict.fromkeys(["pinet", *(pc.slot_of(r) for r in records if pc.text(r.get("problem")) in split)]))
        lines += ["", *compact_rows(records, [(s, s) for s in split], methods, seeds, NOT_RUN)]
    return lines + [""]


def other_instances_section(published: Sequence[Mapping[str, str]], problems: Sequence[str], refs: dict[str, int]) -> list[str]:
    """Published figures of other instances: listed for the record, never beside our rows."""
    others = [p for p in published if not any(same_instance(p, q) for q in problems)]
    if not others:
        return []
    lines = [
        "## Other instances: not comparable row by row", "",
        "Published figures on instances other than ours (another draw of the problem, other test inputs): a "
        "different optimum, so neither objectives nor gaps compare with the blocks above.", "",
        *_head(("their instance", "method", "objective", "max eq.", "max ineq.", "train s", "test time", "source", "note")),
    ]  # fmt: skip
    for p in others:
        test_time = f"{p['test_time']} {p.get('test_time_unit') or ''}".strip() if p.get("test_time") else "—"
        lines.append(_line([p["problem"], p["method"], p.get("objective_value") or "—", p.get("max_eq_viol") or "—",
                            p.get("max_ineq_viol") or "—", p.get("train_time_s") or "—", test_time, _cite(p, refs),
                            p.get("note") or ""]))  # fmt: skip
    return lines + [""]


def peers_table(
    records: Sequence[Record],
    published: Sequence[Mapping[str, str]] = (),
    problems: Sequence[str] = PROBLEMS,
    methods: Sequence[str] = METHODS,
    seeds: Sequence[int] = SEEDS,
    missing_notes: Mapping[tuple[str, str], str] | None = None,
    header: str = "",
    timings: Sequence[Mapping[str, Any]] | None = None,
    pinet_published: Sequence[Mapping[str, str]] = (),
    datasets: bool = True,
) -> str:
    """Markdown: a block per problem, DC3's nine QP datasets, Pinet's figures, other instances, then the sources.

    ``records``: rows of ``load_records``. ``missing_notes``: ``{(problem, slot): text}`` said of seeds with no
    record (default ``NOT_RUN``). ``timings``: rows of :func:`peer_timings.load_timings` (None: no timing at all).
    """
    notes = dict(missing_notes or {})
    refs: dict[str, int] = {}
    lines = [header.rstrip(), ""] if header else []
    for problem in problems:
        instance = INSTANCES.get(problem, problem)
        mine = [r for r in records if pc.text(r.get("problem")) == instance]
        lines += _block(problem, mine, methods, seeds, notes, timings, published, refs)
    if datasets:
        lines += dc3_qp_datasets_section(records, seeds)
    if pinet_published:
        lines += pinet_section(records, pinet_published, refs, seeds)
    lines += other_instances_section(published, problems, refs)
    if refs:
        lines += ["Sources of the published figures:", ""]
        lines += [f"{k}. {source}" for source, k in sorted(refs.items(), key=lambda kv: kv[1])]
        flagged = [p for p in published if str(p.get("verified", "yes")) != "yes" and p["source"] in refs]
        lines += [""] + [f"- unverified: {p['problem']} / {p['method']}: {p.get('note', '')}" for p in flagged]
    return "\n".join(lines).rstrip() + "\n"
