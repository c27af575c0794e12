"""The figure of :mod:`bench_methods`: every method's time per call beside its arithmetic floor, one panel per
problem and batch size, so that the peers (Pinet, its JAX package, FSNet, DC3, ...) sit beside the proposed layer
and the bare network on one axis (issue 44: the benchmarks page's latency figure had none of the peers).

``python benchmarks/methods_figure.py METHODS.csv OUT.png``; :func:`draw` is what ``bench_methods.py`` calls.
"""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path


def _float(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def draw(rows: list[dict], path: Path, title: str = "") -> Path | None:
    """One horizontal bar per method (its median ms, log scale) and a tick at its floor; rows that are not ``ok``
    are named on the axis with their status. Returns the path, or None when no row was timed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if r.get("status") == "ok"]
    if not ok:
        return None
    problems = list(dict.fromkeys(r["problem"] for r in rows))
    batches = sorted({int(_float(r["batch_size"])) for r in ok})
    methods = list(dict.fromkeys(r["method"] for r in rows if r.get("method") not in (None, "*")))
    fig, axes = plt.subplots(len(problems), len(batches), figsize=(5.2 * len(batches), 0.32 * len(methods) * len(problems) + 1.4),
                             squeeze=False)
    for i, problem in enumerate(problems):
        for j, B in enumerate(batches):
            ax = axes[i][j]
            labels, times, floors = [], [], []
            for m in methods:
                hit = [r for r in rows if r["problem"] == problem and r["method"] == m
                       and (r.get("status") != "ok" or int(_float(r["batch_size"])) == B)]
                r = next((h for h in hit if h.get("status") == "ok"), hit[0] if hit else None)
                if r is None:
                    continue
                labels.append(m if r.get("status") == "ok" else f"{m} ({r.get('status')})")
                times.append(_float(r.get("median_ms")) if r.get("status") == "ok" else math.nan)
                floors.append(_float(r.get("floor_ms")) if r.get("status") == "ok" else math.nan)
            y = list(range(len(labels)))
            ax.barh(y, [t if t == t else 0 for t in times], color="#4c72b0", label="median ms per call")
            ax.scatter([f for f in floors], y, marker="|", s=200, color="#c44e52", label="floor (multiply-adds at the MLP's rate)", zorder=3)
            ax.set_yticks(y, labels, fontsize=8)
            ax.invert_yaxis()
            ax.set_xscale("log")
            ax.set_xlabel("ms per call (log)")
            ax.set_title(f"{problem}, batch {B}", fontsize=10)
            ax.grid(axis="x", which="both", alpha=0.3)
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="upper center", ncol=2, fontsize=8, frameon=False)  # above the panels, over no bar
    if title:
        fig.suptitle(title, fontsize=9, y=0.995)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        raise SystemExit("usage: python benchmarks/methods_figure.py METHODS.csv OUT.png")
    with open(argv[0], newline="") as f:
        rows = list(csv.DictReader(f))
    out = draw(rows, Path(argv[1]))
    print(out or "no timed rows: nothing drawn")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
