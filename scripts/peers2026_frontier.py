"""The refined proposed method against the plain one and the peers on DC3's problems (issue 28): a summary table
and the gap / training time / violation frontier, from run records.

Reads every ``record.json`` under the given directories (default: study ``peers2026``'s records and the peers
table's), groups runs by (problem, method, variant, epochs, lr) and writes, per group over its seeds: the mean and
spread of the mean gap, the worst gap, the worst relative inequality and equality violations, the training time
and epochs. ``--figure`` also draws mean gap against training time per method, marking runs whose worst
inequality violation is not exactly 0 with an open symbol.

    python scripts/peers2026_frontier.py                    # -> results/peers2026/summary.md
    python scripts/peers2026_frontier.py --figure results/peers2026/frontier.png
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

DEFAULT_DIRS = ("results/peers2026/records", "results/peers/records")
PROBLEMS = ("dc3_qp_eq50_ineq50", "dc3_nonconvex_eq50_ineq50")


def load(dirs: list[str]) -> list[dict]:
    rows = []
    for d in dirs:
        for path in sorted(Path(d).rglob("record.json")):
            rec = json.loads(path.read_text())
            if rec.get("status") != "ok":
                continue
            row = dict(rec["row"])
            cfg = rec["config"]
            row["lr"] = cfg["trainer"]["lr"]
            row["schedule_epochs"] = cfg["trainer"]["epochs"]
            row["record"] = str(path)
            rows.append(row)
    return rows


def summarise(rows: list[dict], problems: tuple[str, ...]) -> list[dict]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        if r["problem"] in problems:
            groups[(r["problem"], r["method"], r.get("variant") or "", r["schedule_epochs"], r["lr"])].append(r)
    out = []
    for (problem, method, variant, epochs, lr), rs in sorted(groups.items()):
        gaps = [r["test/gap_mean"] for r in rs]
        out.append({
            "problem": problem, "method": method, "variant": variant, "epochs": epochs, "lr": lr,
            "seeds": ",".join(str(r["seed"]) for r in sorted(rs, key=lambda r: r["seed"])),
            "gap_mean": statistics.fmean(gaps), "gap_sd": statistics.stdev(gaps) if len(gaps) > 1 else 0.0,
            "gap_worst": max(r["test/gap_worst"] for r in rs),
            "ineq_worst": max(r["test/ineq_viol_worst"] for r in rs),
            "eq_worst": max(r["test/eq_viol_worst"] for r in rs),
            "train_s": statistics.fmean(r["train/time_s"] for r in rs),
            "train_epochs": statistics.fmean(e) if (e := [r["train/epochs"] for r in rs if r.get("train/epochs")]) else None,
        })
    return out


def markdown(summary: list[dict]) -> str:
    head = ("| problem | method | variant | schedule epochs | epochs run | lr | seeds | gap mean % | gap worst % "
            "| ineq. worst (rel.) | eq. worst (rel.) | train s |")
    lines = [head, "|" + "|".join(["---"] * 12) + "|"]
    for s in summary:
        ran = "—" if s["train_epochs"] is None else f"{s['train_epochs']:.4g}"
        lines.append(
            f"| {s['problem']} | {s['method']} | {s['variant']} | {s['epochs']} | {ran} | {s['lr']:g} | "
            f"{s['seeds']} | "
            f"{s['gap_mean']:.3g} ± {s['gap_sd']:.2g} | {s['gap_worst']:.3g} | {s['ineq_worst']:.1e} | "
            f"{s['eq_worst']:.1e} | {s['train_s']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def figure(summary: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    problems = sorted({s["problem"] for s in summary})
    fig, axes = plt.subplots(1, len(problems), figsize=(6 * len(problems), 4.5), squeeze=False)
    for ax, problem in zip(axes[0], problems):
        for s in (s for s in summary if s["problem"] == problem and s["method"] != "optimizer"):
            label = f"{s['method']} {s['variant']} {s['epochs']}ep lr {s['lr']:g}".replace("rule=cost0.5", "").strip()
            exact = s["ineq_worst"] == 0.0
            ax.errorbar(s["train_s"], s["gap_mean"], yerr=s["gap_sd"], fmt="o" if exact else "s",
                        mfc=None if exact else "none", label=f"{label} (ineq {s['ineq_worst']:.0e})", capsize=2)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("training time, s (loaded 2-core CPU)")
        ax.set_ylabel("mean optimality gap, %")
        ax.set_title(problem)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=130)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="*", default=list(DEFAULT_DIRS))
    parser.add_argument("--out", default="results/peers2026/summary.md")
    parser.add_argument("--figure", default=None)
    args = parser.parse_args(argv)
    summary = summarise(load(args.dirs), PROBLEMS)
    text = markdown(summary)
    Path(args.out).write_text(text)
    print(text)
    if args.figure:
        figure(summary, args.figure)


if __name__ == "__main__":
    main()
