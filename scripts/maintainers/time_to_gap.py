"""Training seconds until a run's validation gap first fell to each threshold (issue 41: the refined method against
Pinet's published gaps at equal wall clock).

    python scripts/maintainers/time_to_gap.py results/peers2026/records/frontier --thresholds 0.31 0.135 0.05

Per run: the first validated epoch at or below each threshold and its time, estimated as that many epochs at the
run's mean epoch time (``train/time_s / train/epochs``: the records keep the total, not a per-epoch clock).
Validation runs every ``trainer.val_every`` epochs, so the epoch is an upper bound within that step.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path


def first_epochs(run: Path, thresholds: list[float]) -> dict[float, int]:
    """``{threshold: 1-based epoch}`` of the first validation at or below each threshold."""
    found: dict[float, int] = {}
    with open(run / "epochs.csv") as fh:
        for row in csv.DictReader(fh):
            gap = row.get("val/gap_mean")
            for t in thresholds:
                if gap and float(gap) <= t and t not in found:
                    found[t] = int(row["epoch"]) + 1
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+")
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.31, 0.135, 0.05])
    args = parser.parse_args(argv)
    print("| problem | seed | train s | " + " | ".join(f"s to <= {t:g} % (epoch)" for t in args.thresholds) + " |")
    print("|---|---|---|" + "---|" * len(args.thresholds))
    for record in sorted(p for d in args.dirs for p in Path(d).rglob("record.json")):
        row = json.loads(record.read_text())["row"]
        if row.get("status") != "ok" or not (record.parent / "epochs.csv").exists():
            continue
        per_epoch = row["train/time_s"] / row["train/epochs"]
        found = first_epochs(record.parent, args.thresholds)
        cells = [f"{found[t] * per_epoch:.0f} ({found[t]})" if t in found else "not reached" for t in args.thresholds]
        print(f"| {row['problem']} | {row['seed']} | {row['train/time_s']:.0f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
