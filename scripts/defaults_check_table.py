"""The table of issue 60's check of the proposed methods' own trainer (docs/own_problem.md, "Defaults on one's own
problem"): one row per problem file and method, over the seeds recorded under results/defaults_check/records/.

    python scripts/defaults_check_table.py            # prints the markdown and writes results/defaults_check/table.md
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _mean_sd(values: list[float], fmt: str) -> str:
    if len(values) == 1:
        return format(values[0], fmt)
    return f"{format(statistics.mean(values), fmt)} ± {format(statistics.stdev(values), fmt)}"


def table(records_dir: Path) -> str:
    """The markdown table of every ``ok`` record under ``records_dir``, grouped by (problem file, method, trainer)."""
    groups: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for path in sorted(records_dir.glob("*/*/record.json")):
        record = json.loads(path.read_text())
        if record.get("status") != "ok":
            continue
        cfg, row = record["config"], record["row"]
        problem = Path(cfg["problem"]["path"]).stem if cfg["problem"].get("path") else cfg["problem"]["name"]
        groups[(problem, row["method"], cfg["trainer"]["name"])].append(row)
    lines = ["| problem | method | trainer | seeds | gap mean % | gap SGM % | gap worst % | eq. viol. worst | ineq. viol. worst "
             "| train s | epochs run | stopped by |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (problem, method, trainer), rows in sorted(groups.items()):
        stops = sorted({"cap" if r.get("train/time_capped") else "early stop" if r.get("train/early_stopped") else "epochs"
                        for r in rows})
        lines.append(
            f"| {problem} | {method} | {trainer} | {','.join(str(r['seed']) for r in rows)} "
            f"| {_mean_sd([r['test/gap_mean'] for r in rows], '.3g')} | {_mean_sd([r['test/gap_sgm'] for r in rows], '.3g')} "
            f"| {max(r['test/gap_worst'] for r in rows):.3g} | {max(r['test/eq_viol_worst'] for r in rows):.1e} "
            f"| {max(r['test/ineq_viol_worst'] for r in rows):.1e} | {_mean_sd([r['train/time_s'] for r in rows], '.0f')} "
            f"| {', '.join(str(int(r['train/epochs'])) for r in rows)} | {', '.join(stops)} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=Path, default=ROOT / "results" / "defaults_check" / "records")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "defaults_check" / "table.md")
    args = parser.parse_args()
    text = table(args.records)
    args.out.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
