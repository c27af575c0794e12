"""Issue 41's reproduction table: Pinet's published e662b15 runs against ours (conf/experiment/pinet_e662b15.yaml).

Why: one command renders the comparison in docs/pinet.md from the committed records, never from memory.

    python scripts/maintainers/pinet_e662b15_table.py [results/pinet/e662b15]
"""

from __future__ import annotations

import math
import sys

from hardlinear.harness.results import load_records
from hardlinear.reporting.pinet_published import load_pinet_published, ours_for

HEAD = (
    "| problem | backward | accuracy | seeds | RS gap of means %: published / ours | ours / published | ours by seed | "
    "RS mean of per-instance % (ours: own optima) | ineq. max abs mean: published / ours | "
    "ineq. max abs worst: published / ours | train s: published (their machine) / ours (CPU) |"
)


def _pm(mean_std: tuple[float, float], fmt: str) -> str:
    mean, std = mean_std
    return format(mean, fmt) if math.isnan(std) else f"{mean:{fmt}} ± {std:{fmt}}"


def table(root: str) -> list[str]:
    """Markdown lines, one per published Pinet run, ``not run`` where no record of its setting exists."""
    records = load_records(root, quiet=True).to_dict("records")
    lines = [HEAD, "|" + "---|" * HEAD.count(" | ") + "---|"]
    for p in load_pinet_published():
        if p["method"] != "Pinet":
            continue
        ours = ours_for([r for r in records if r.get("experiment") == "pinet_e662b15"], p)
        cells = [p["problem"], p["backward"], p["accuracy"]]
        if ours is None:
            lines.append(
                "| " + " | ".join([*cells, "0", f"{p['rs_gap_of_means_pct']:.2f} / not run"] + [""] * 5) + " |"
            )
            continue
        ratio = ours.rs_gap_of_means_pct[0] / p["rs_gap_of_means_pct"]
        cells += [
            str(ours.seeds),
            f"{p['rs_gap_of_means_pct']:.2f} / {_pm(ours.rs_gap_of_means_pct, '.2f')}",
            f"{ratio:.2f}",
            ", ".join(f"{g:.2f}" for g in ours.rs_gap_of_means_by_seed),
            f"{p['rs_mean_pct']:.2f} / {_pm(ours.rs_mean_pct, '.2f')}",
            f"{p['ineq_max_abs_mean']:.1e} / {ours.ineq_max_abs_mean[0]:.1e}",
            f"{p['ineq_max_abs_worst']:.1e} / {ours.abs_worst:.1e}",
            f"{p['train_s']:.0f} / {ours.train_s[0]:.0f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


if __name__ == "__main__":
    print("\n".join(table(sys.argv[1] if len(sys.argv) > 1 else "results/pinet/e662b15")))
