"""Batch-1 latency and batch-1024 throughput for the peers table, read only from ``benchmarks/bench_methods.py``
output (every method of a problem timed in one process of its own, one footing), never from the records, whose
in-run timings were taken one run at a time on a loaded machine.

A timing row belongs to a table row when it timed that row's trained network (``weights = checkpoint RUN_DIR``,
matched by the run's identity or directory), or, failing that, when it timed a freshly initialised network of the
same problem config, method and variant (bench rows carry ``variant`` since issue 28; older outputs lack it and
their fresh rows match nothing). Cells say which (``fresh net``).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hardlinear.reporting.peer_cells import fmt, median, num, text

BATCH = 1024


@dataclass(frozen=True)
class Timing:
    """What the table shows of the bench rows that match one table row."""

    batch1_ms: float
    batch1_iqr: tuple[float, float]
    throughput: float  # instances / s at batch ``BATCH``; NaN when not timed there
    note: str  # why there is no throughput (skipped call, not timed at that batch), else ''
    fresh: bool  # timed on a freshly initialised network, not the run's trained one
    source: str

    def cells(self) -> tuple[str, str]:
        tag = " (fresh net)" if self.fresh else ""
        b1 = f"{fmt(self.batch1_ms, 'f2')} ({fmt(self.batch1_iqr[0], 'f2')}-{fmt(self.batch1_iqr[1], 'f2')}){tag}"
        thr = fmt(self.throughput, "int") + tag if math.isfinite(self.throughput) else f"— ({self.note})"
        return b1, thr


def _read(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".json":
        return list(json.loads(path.read_text()))
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _checkpoint_dir(weights: str) -> str:
    return weights.removeprefix("checkpoint ").strip() if weights.startswith("checkpoint ") else ""


def _identity(run_dir: str) -> str:
    """The identity in the run's ``record.json`` when the directory is here, else ''."""
    try:
        return str(json.loads((Path(run_dir) / "record.json").read_text()).get("identity", ""))
    except (OSError, ValueError, AttributeError):
        return ""


def load_timings(dirs: Sequence[str | Path]) -> list[dict[str, Any]]:
    """The rows of every ``methods.csv`` and ``*_rows.json`` (bench_methods' per-problem rows) in ``dirs``.

    Each row gains ``source`` (its file), ``run_dir`` and ``identity`` (of a checkpoint it timed). A problem timed
    in two files is refused: the table promises one process per problem, and two would be two footings.
    """
    rows: list[dict[str, Any]] = []
    owner: dict[str, Path] = {}
    for d in map(Path, dirs):
        files = sorted(d.glob("methods.csv")) + sorted(d.glob("*_rows.json"))
        if not files:
            raise FileNotFoundError(
                f"--timings {d}: no methods.csv or *_rows.json; write one with "
                f"python benchmarks/bench_methods.py --full --problems <problem> --out-dir {d} --checkpoint RUN_DIR ..."
            )
        for path in files:
            part = _read(path)
            for problem in {text(r.get("problem")) for r in part}:
                if owner.setdefault(problem, path) != path:
                    raise ValueError(
                        f"problem {problem} is timed in both {owner[problem]} and {path}: give one timing output per "
                        "problem (--timings), so that its methods compare within one process"
                    )
            for r in part:
                run_dir = _checkpoint_dir(text(r.get("weights")))
                rows.append({**r, "source": str(path), "run_dir": run_dir, "identity": _identity(run_dir) if run_dir else ""})
    return rows


def _dirs_of(records: Sequence[Mapping[str, Any]]) -> set[str]:
    """Every name a record's run directory goes by: where its record lies here, and where it ran."""
    out = set()
    for r in records:
        for d in (Path(text(r.get("record"))).parent if text(r.get("record")) else None, text(r.get("run_dir")) or None):
            if d is not None:
                out.add(str(Path(d).resolve()))
    return out


def timing_for(
    records: Sequence[Mapping[str, Any]], problem_config: str, method: str, variant: str, timings: Sequence[Mapping[str, Any]]
) -> Timing | None:
    """The timing of the table row made of ``records`` (one group), or None when ``timings`` has none for it."""
    identities = {text(r.get("identity")) for r in records} - {""}
    dirs = _dirs_of(records)
    trained = [
        t for t in timings
        if t["run_dir"] and (t["identity"] in identities or str(Path(t["run_dir"]).resolve()) in dirs)
    ]  # fmt: skip
    fresh = [
        t for t in timings
        if not t["run_dir"] and text(t.get("problem")) == problem_config and text(t.get("method")) == method
        and "variant" in t and text(t.get("variant")) == variant
    ]  # fmt: skip
    batch1_ok = lambda rows: [t for t in rows if num(t.get("batch_size")) == 1 and text(t.get("status")) == "ok"]  # noqa: E731
    chosen = trained if batch1_ok(trained) else fresh  # a checkpoint that failed to load leaves the fresh timing
    ok1 = batch1_ok(chosen)
    if not ok1:
        return None
    big = [t for t in chosen if num(t.get("batch_size")) == BATCH]
    big_ok = [t for t in big if text(t.get("status")) == "ok"]
    throughput = median([BATCH / (num(t["median_ms"]) / 1000.0) for t in big_ok]) if big_ok else math.nan
    note = "" if big_ok else (f"batch {BATCH} {text(big[0].get('status'))}: {text(big[0].get('note'))}" if big else f"not timed at batch {BATCH}")
    return Timing(
        batch1_ms=median([num(t.get("median_ms")) for t in ok1]),
        batch1_iqr=(median([num(t.get("spread_lo_ms")) for t in ok1]), median([num(t.get("spread_hi_ms")) for t in ok1])),
        throughput=throughput,
        note=note,
        fresh=chosen is fresh,
        source=", ".join(sorted({text(t["source"]) for t in ok1})),
    )
