"""Where a sweep's wall time goes: each stage's seconds and share, per method, from a study's records.

Runs recorded since the stage timings (``time/*_s``, harness/runner.py ``stage_times``) split exactly: the
offline set-up (decision rule, factorisations), the data sets (and their reference solves when not cached),
the training steps, validation, the checkpoint and the evaluation, summing to ``time/run_s``. Older records
(the committed paper study, ``results/paper/runs.csv``) carry only ``offline/time_s``, ``data/*_build_s`` and
``train/time_s`` (training *with* validation); their evaluation was not timed. For those the table says
"train+val" and leaves the evaluation out, rather than guessing. Where a run's ``epochs.csv`` has the
per-epoch ``time/val_s`` it is summed as a check. Examples::

    python scripts/time_attribution.py --results results/paper/runs.csv results/paper/runs --study paper
    python scripts/time_attribution.py --results /tmp/sweep --study attr --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

STAGES = ("offline", "data", "train_steps", "val", "checkpoint", "eval")
"""The stages of a run with stage timings (``time/<stage>_s``), in the order they run."""
LEGACY_STAGES = ("offline", "data", "train+val")
"""What a record from before the stage timings can say."""


def _num(value) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out


def run_stages(row) -> tuple[dict[str, float], bool]:
    """``({stage: seconds}, exact)`` of one results row: exact from ``time/*_s``, else the legacy columns."""
    if not math.isnan(_num(row.get("time/run_s"))):
        return {s: _num(row.get(f"time/{s}_s")) for s in STAGES}, True
    data = sum(v for v in (_num(row.get("data/val_build_s")), _num(row.get("data/test_build_s"))) if not math.isnan(v))
    return {"offline": _num(row.get("offline/time_s")), "data": data, "train+val": _num(row.get("train/time_s"))}, False


def attribute(df) -> dict:
    """Per method and overall: the runs, each stage's seconds (NaN counted as 0, with a count of the runs that
    lacked it) and share of the attributed total, and whether the split is exact."""
    per: dict[str, dict] = {}
    for _, row in df.iterrows():
        if str(row.get("status")) not in ("ok", "diverged"):
            continue
        stages, exact = run_stages(row)
        entry = per.setdefault(str(row["method"]), {"runs": 0, "exact_runs": 0, "seconds": {}, "missing": {}})
        entry["runs"] += 1
        entry["exact_runs"] += int(exact)
        for stage, seconds in stages.items():
            if math.isnan(seconds):
                entry["missing"][stage] = entry["missing"].get(stage, 0) + 1
                continue
            entry["seconds"][stage] = entry["seconds"].get(stage, 0.0) + seconds
    total: dict[str, float] = {}
    for entry in per.values():
        entry["total_s"] = sum(entry["seconds"].values())
        entry["share"] = {s: v / entry["total_s"] for s, v in entry["seconds"].items()} if entry["total_s"] else {}
        for stage, seconds in entry["seconds"].items():
            total[stage] = total.get(stage, 0.0) + seconds
    grand = sum(total.values())
    largest = sorted(
        ((m, s, v) for m, e in per.items() for s, v in e["seconds"].items()), key=lambda item: -item[2]
    )[:5]
    return {
        "methods": per, "total_s": grand, "seconds": total,
        "share": {s: v / grand for s, v in total.items()} if grand else {},
        "largest": [{"method": m, "stage": s, "seconds": v, "share": v / grand if grand else math.nan} for m, s, v in largest],
    }


def epoch_val_seconds(df) -> dict[str, float]:
    """Per method, the validation seconds summed from the runs' ``epochs.csv`` (``time/val_s``), where present."""
    import csv

    out: dict[str, float] = {}
    for _, row in df.iterrows():
        path = Path(str(row.get("run_dir", ""))) / "epochs.csv"
        if not path.is_file():
            continue
        with path.open(newline="") as fh:
            values = [_num(r.get("time/val_s")) for r in csv.DictReader(fh)]
        values = [v for v in values if not math.isnan(v)]
        if values:
            out[str(row["method"])] = out.get(str(row["method"]), 0.0) + sum(values)
    return out


def markdown(report: dict) -> str:
    stages = [s for s in (*STAGES, "train+val") if s in report["seconds"]]
    head = "| method | runs | total (s) | " + " | ".join(f"{s} s (share)" for s in stages) + " |"
    lines = [head, "|" + "---|" * (3 + len(stages))]
    ordered = sorted(report["methods"].items(), key=lambda kv: -kv[1]["total_s"])
    for method, e in ordered:
        cells = [f"{e['seconds'][s]:.1f} ({100 * e['share'][s]:.0f} %)" if s in e["seconds"] else "-" for s in stages]
        lines.append(f"| {method} | {e['runs']} | {e['total_s']:.1f} | " + " | ".join(cells) + " |")
    cells = [f"{report['seconds'][s]:.1f} ({100 * report['share'][s]:.0f} %)" for s in stages]
    lines.append(f"| **all** | {sum(e['runs'] for e in report['methods'].values())} | {report['total_s']:.1f} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Largest (method, stage) shares of the whole: " + "; ".join(
        f"{x['method']} {x['stage']} {x['seconds']:.1f} s ({100 * x['share']:.0f} %)" for x in report["largest"]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", nargs="+", default=["results/paper/runs.csv", "results/paper/runs"],
                   help="results roots: directories of records and/or legacy results CSVs")
    p.add_argument("--study", default=None, help="keep this study only (default: every run under the roots)")
    p.add_argument("--json", default=None, help="also write the attribution here")
    args = p.parse_args(argv)
    missing = [r for r in args.results if not Path(r).exists()]
    if missing:
        print(f"results not found: {', '.join(missing)} (pass --results)", file=sys.stderr)
        return 2
    from hardlinear.harness.results import load_records

    df = load_records(args.results, study=args.study, quiet=True)
    if df.empty:
        print(f"no runs under {args.results}{' in study ' + args.study if args.study else ''}", file=sys.stderr)
        return 2
    report = attribute(df)
    report["epochs_csv_val_s"] = epoch_val_seconds(df)
    exact = sum(e["exact_runs"] for e in report["methods"].values())
    runs = sum(e["runs"] for e in report["methods"].values())
    print(f"{runs} finished runs, {exact} with stage timings (time/*_s); the others split as offline / data / train+val only")
    print(markdown(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=float) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
