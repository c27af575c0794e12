"""The refined proposed method against the plain one and the peers on DC3's problems (issues 28, 41): a summary
table, a per-dataset table over DC3's nine QPs and the nonconvex 50/50 problem, and the gap / training time /
violation frontier, from run records.

Reads every ``record.json`` under the given directories (default: study ``peers2026``'s records, ``nine/`` and
``frontier/`` among them, and the peers table's), groups runs by (problem, method, variant, epochs, lr, batch size,
sampling) and writes, per group over its seeds: the mean and spread of the mean gap, the worst gap, the worst
relative inequality and equality violations, the training time and epochs.

- ``--out`` (summary.md): every group on DC3's 50/50 convex and nonconvex problems.
- ``--nine-out`` (nine.md): one table per dataset (the nine ``dc3_qp_eq*_ineq*`` and ``dc3_nonconvex_eq50_ineq50``)
  for the recommended refined setting (``method=proposed_refined``: ``refine=dr``, batch 256, one pass an epoch),
  the older refined variant (batch 64), Pinet, FSNet and HardNet-Aff; the best mean in bold, overall and among
  exactly feasible runs (worst inequality violation exactly 0).
- ``--figure``: mean gap against training time on the two 50/50 problems, one colour and marker per method and
  variant, open markers for runs with a nonzero worst inequality violation (annotated next to each point), and
  Pinet's published runs (antonioterpin/pinet @ e662b15, ``hardlinear.reporting.pinet_published``) as stars.

    PYTHONPATH=src python scripts/maintainers/peers2026_frontier.py --figure results/peers2026/frontier.png
      # -> results/peers2026/summary.md, results/peers2026/nine.md, results/peers2026/frontier.png
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

DEFAULT_DIRS = ("results/peers2026/records", "results/peers/records")
PROBLEMS = ("dc3_qp_eq50_ineq50", "dc3_nonconvex_eq50_ineq50")
NINE_PROBLEMS = (
    *(f"dc3_qp_eq{m}_ineq50" for m in (10, 30, 50, 70, 90)),
    *(f"dc3_qp_eq50_ineq{m}" for m in (10, 30, 70, 90)),
    "dc3_nonconvex_eq50_ineq50",
)
# Pinet's published runs name the problem without its sizes; both are DC3's 50/50 instances with DC3's test split.
PUBLISHED_PROBLEM = {"dc3_qp": "dc3_qp_eq50_ineq50", "dc3_nonconvex": "dc3_nonconvex_eq50_ineq50"}
PUBLISHED_SOURCE = "antonioterpin/pinet @ e662b15"

RECOMMENDED = "proposed_refined (recommended)"
PEERS = {"pinet": "Pinet", "fsnet": "FSNet", "hardnet_aff": "HardNet-Aff", "dc3": "DC3", "ldr": "LDR",
         "projection_layer": "projection layer", "gauge": "gauge", "optimizer": "optimizer"}  # fmt: skip
# (colour, marker) per label; labels not listed get the next unused pair of FALLBACK.
STYLE = {
    RECOMMENDED: ("#d62728", "D"),
    "proposed, refined (10/50 DR steps)": ("#ff7f0e", "o"),
    "proposed, refined (10/50 DR steps, pick=objective)": ("#8c564b", "p"),
    "proposed": ("#1f77b4", "s"),
    "proposed, STE gradient": ("#17becf", "v"),
    "Pinet": ("#9467bd", "^"),
    "FSNet": ("#2ca02c", "P"),
    "HardNet-Aff": ("#e377c2", "X"),
    "DC3": ("#7f7f7f", "h"),
    "LDR": ("#bcbd22", "<"),
    "projection layer (Clarabel)": ("#000000", ">"),
}
FALLBACK = [(c, m) for m in ("d", "H", "8", "1", "2") for c in ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd")]
PUBLISHED_MARKER = "*"
NINE_FAMILIES = (RECOMMENDED, "older refined", "Pinet", "FSNet", "HardNet-Aff")


def load(dirs: Iterable[str]) -> list[dict]:
    """The ok records' rows with the trainer and method settings the grouping needs; a run found twice (the same
    identity under two directories) counts once. Records that did not finish are kept with ``status`` and
    ``reason`` (the per-dataset table says why a cell is empty)."""
    rows, seen = [], set()
    for d in dirs:
        for path in sorted(Path(d).rglob("record.json")):
            rec = json.loads(path.read_text())
            ident = rec.get("identity") or str(path)
            if ident in seen:
                continue
            seen.add(ident)
            cfg = rec.get("config") or {}
            trainer, method = cfg.get("trainer") or {}, cfg.get("method") or {}
            row = dict(rec.get("row") or {})
            row.setdefault("method", method.get("name", "?"))
            row.update({
                "status": rec.get("status"), "reason": rec.get("reason") or "",
                "lr": trainer.get("lr"), "schedule_epochs": trainer.get("epochs"),
                "batch_size": trainer.get("batch_size"), "sampling": trainer.get("sampling"),
                "refine": method.get("refine"), "gradient": method.get("gradient"),
                "refine_pick": method.get("refine_pick"), "record": str(path),
            })  # fmt: skip
            rows.append(row)
    return rows


PROPOSED = ("proposed", "proposed_refined")  # records before issue 60 name method=proposed_refined runs "proposed"


def is_recommended(r: Mapping[str, Any]) -> bool:
    """``method=proposed_refined`` on DC3's problems (conf/problem_method/dc3_qp_proposed_refined.yaml): the proposed
    layer with DR refinement, trained one pass an epoch in batches of 256."""
    return (r.get("method") in PROPOSED and r.get("refine") == "dr" and r.get("batch_size") == 256
            and r.get("sampling") == "pass")  # fmt: skip


def label(r: Mapping[str, Any]) -> str:
    """A short legend / table label from the record's method, variant and trainer settings."""
    method, variant = r.get("method", "?"), r.get("variant") or ""
    if method in PROPOSED:
        refine = r.get("refine") or ("dr" if "refine=dr" in variant else None)
        if refine == "dr":
            if is_recommended(r):
                return RECOMMENDED
            steps = re.search(r"dr\((\d+)/(\d+) steps", variant)
            text = f"proposed, refined ({steps[1]}/{steps[2]} DR steps" if steps else "proposed, refined (DR steps"
            return text + (", pick=objective)" if "pick=objective" in variant else ")")
        if refine not in (None, "none"):
            return f"proposed, refine={refine}"
        return "proposed, STE gradient" if r.get("gradient") == "ste" or "gradient=ste" in variant else "proposed"
    name = PEERS.get(method, method)
    if method == "projection_layer" and variant:
        return f"{name} ({variant})"
    return name


def family(lab: str) -> str:
    """The per-dataset table's row kind of a label: the older refined variants are one kind."""
    return "older refined" if lab.startswith("proposed, refined") else lab


def summarise(rows: Sequence[Mapping[str, Any]], problems: Sequence[str]) -> list[dict]:
    groups: dict[tuple, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        if r.get("status") == "ok" and r["problem"] in problems:
            key = (r["problem"], r["method"], r.get("variant") or "", r["schedule_epochs"], r["lr"],
                   r.get("batch_size"), r.get("sampling") or "")  # fmt: skip
            groups[key].append(r)
    out = []
    for (problem, method, variant, epochs, lr, batch, sampling), rs in sorted(
        groups.items(), key=lambda kv: str(kv[0])
    ):
        gaps = [r["test/gap_mean"] for r in rs]
        ran = [r["train/epochs"] for r in rs if r.get("train/epochs")]
        out.append({
            "problem": problem, "method": method, "variant": variant, "epochs": epochs, "lr": lr,
            "batch_size": batch, "sampling": sampling, "label": label(rs[0]), "n_seeds": len(rs),
            "seeds": ",".join(str(r["seed"]) for r in sorted(rs, key=lambda r: r["seed"])),
            "gap_mean": statistics.fmean(gaps), "gap_sd": statistics.stdev(gaps) if len(gaps) > 1 else 0.0,
            "gap_worst": max(r["test/gap_worst"] for r in rs),
            "ineq_worst": max(r["test/ineq_viol_worst"] for r in rs),
            "eq_worst": max(r["test/eq_viol_worst"] for r in rs),
            "train_s": statistics.fmean(r["train/time_s"] for r in rs),
            "train_epochs": statistics.fmean(ran) if ran else None,
        })  # fmt: skip
    return out


def markdown(summary: Sequence[Mapping[str, Any]]) -> str:
    head = ("| problem | method | variant | schedule epochs | epochs run | lr | batch | seeds | gap mean % | "
            "gap worst % | ineq. worst (rel.) | eq. worst (rel.) | train s |")  # fmt: skip
    lines = [head, "|" + "|".join(["---"] * 13) + "|"]
    for s in summary:
        ran = "—" if s["train_epochs"] is None else f"{s['train_epochs']:.4g}"
        lines.append(
            f"| {s['problem']} | {s['label']} | {s['variant']} | {s['epochs']} | {ran} | {s['lr']:g} | "
            f"{s['batch_size']} | {s['seeds']} | "
            f"{s['gap_mean']:.3g} ± {s['gap_sd']:.2g} | {s['gap_worst']:.3g} | {s['ineq_worst']:.1e} | "
            f"{s['eq_worst']:.1e} | {s['train_s']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def _short_reason(reason: str) -> str:
    text = re.split(r"; (?=[a-z])|\n", reason)[0].strip().replace("|", "\\|")
    return text if len(text) <= 140 else text[:137] + "..."


def nine_markdown(rows: Sequence[Mapping[str, Any]], problems: Sequence[str] = NINE_PROBLEMS) -> str:
    """One table per dataset: the recommended refined setting, the older refined variant, Pinet, FSNet and
    HardNet-Aff, a row per (method, variant, epochs, lr, batch) group; an empty kind says why (failed records'
    reason, or no record)."""
    summary = summarise(rows, problems)
    out = [
        "# DC3's nine QP datasets and the nonconvex 50/50 problem",
        "",
        "Generated by `scripts/maintainers/peers2026_frontier.py` from run records (results/peers2026/records, "
        "results/peers/records). Mean gap ± sample sd over seeds (DC3's test split); worst gap and worst relative "
        "violations over all seeds' test instances; train s: mean wall-clock training seconds on a shared, loaded "
        "2-core CPU (compare within a dataset only). **Bold**: the lowest mean gap on the dataset; *italic bold*: "
        "the lowest among exactly feasible groups (worst inequality violation exactly 0), where it differs.",
        "",
    ]
    for problem in problems:
        rs = [s for s in summary if s["problem"] == problem and family(s["label"]) in NINE_FAMILIES]
        rs.sort(
            key=lambda s: (NINE_FAMILIES.index(family(s["label"])), s["label"], s["epochs"], s["lr"], s["batch_size"])
        )
        best = min(rs, key=lambda s: s["gap_mean"], default=None)
        feasible = [s for s in rs if s["ineq_worst"] == 0.0]
        best_feasible = min(feasible, key=lambda s: s["gap_mean"], default=None)
        out += [f"## {problem}", "",
                "| method | epochs | lr | batch | seeds | gap mean % | gap worst % | ineq. worst (rel.) "
                "| eq. worst (rel.) | train s |",
                "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for kind in NINE_FAMILIES:
            mine = [s for s in rs if family(s["label"]) == kind]
            for s in mine:
                gap = f"{s['gap_mean']:.3g} ± {s['gap_sd']:.2g}"
                if s is best:
                    gap = f"**{gap}**"
                elif s is best_feasible:
                    gap = f"***{gap}***"
                out.append(
                    f"| {s['label']} | {s['epochs']} | {s['lr']:g} | {s['batch_size']} | {s['seeds']} | {gap} | "
                    f"{s['gap_worst']:.3g} | {s['ineq_worst']:.1e} | {s['eq_worst']:.1e} | {s['train_s']:.0f} |"
                )
            if not mine:
                failed = [r for r in rows if r.get("problem") == problem and r.get("status") != "ok"
                          and family(label(r)) == kind]  # fmt: skip
                why = (f"not run: {_short_reason(failed[0]['reason'])} ({len(failed)} records)" if failed
                       else "no record")  # fmt: skip
                out.append(f"| {kind} | {why} | | | | | | | | |")
        if best is not None:
            note = f"Lowest mean gap: {best['label']} ({best['gap_mean']:.3g} %"
            note += ", exactly feasible)." if best is best_feasible else f", worst ineq. {best['ineq_worst']:.0e})."
            if best_feasible is not None and best_feasible is not best:
                note += f" Lowest exactly feasible: {best_feasible['label']} ({best_feasible['gap_mean']:.3g} %)."
            out += ["", note]
        out.append("")
    return "\n".join(out)


def style_of(lab: str, assigned: dict[str, tuple[str, str]]) -> tuple[str, str]:
    if lab in STYLE:
        return STYLE[lab]
    if lab not in assigned:
        used = set(STYLE.values()) | set(assigned.values())
        assigned[lab] = next((s for s in FALLBACK if s not in used), FALLBACK[len(assigned) % len(FALLBACK)])
    return assigned[lab]


def _viol(v: float) -> str:
    return "0" if v == 0.0 else f"{v:.0e}".replace("e-0", "e-")


# Offsets (points) and alignments tried in turn for a point's annotation; the first that overlaps no marker, no
# placed annotation and stays inside the axes wins (else the one with the least overlap).
CANDIDATES = [(5, 3, "left"), (5, -10, "left"), (-5, 3, "right"), (-5, -10, "right"), (0, 8, "center"),
              (0, -16, "center"), (10, 13, "left"), (10, -20, "left"), (-10, 13, "right"), (-10, -20, "right"),
              (0, 20, "center"), (0, -27, "center")]  # fmt: skip


def _place_labels(ax, items: Sequence[tuple], renderer) -> None:
    """Annotate each (x, y, text, colour, fontstyle, marker size) of ``items`` where it hides the least."""
    from matplotlib.transforms import Bbox

    scale = ax.figure.dpi / 72
    taken = []
    for x, y, _, _, _, ms in items:
        px, py = ax.transData.transform((x, y))
        r = ms * scale / 2 + 1
        taken.append(Bbox.from_extents(px - r, py - r, px + r, py + r))
    frame = ax.get_window_extent(renderer)

    def cost(bb) -> float:
        out = sum(
            max(0.0, w) * max(0.0, h)
            for w, h in ((min(bb.x1, t.x1) - max(bb.x0, t.x0), min(bb.y1, t.y1) - max(bb.y0, t.y0)) for t in taken)
        )
        inside = Bbox.intersection(bb, frame)
        return out + 4 * (bb.width * bb.height - (inside.width * inside.height if inside else 0.0))

    for x, y, text, colour, fontstyle, _ in items:
        if not text:
            continue
        best = None
        for dx, dy, ha in CANDIDATES:
            ann = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, fontsize=6.5,
                              color=colour, style=fontstyle)  # fmt: skip
            bb = ann.get_window_extent(renderer)
            c = cost(bb)
            if best is None or c < best[0]:
                if best is not None:
                    best[1].remove()
                best = (c, ann, bb)
            else:
                ann.remove()
            if c == 0:
                break
        taken.append(best[2])


def figure(summary: Sequence[Mapping[str, Any]], path: str | None, published: Sequence[Mapping[str, Any]] = (),
           problems: Sequence[str] = PROBLEMS):  # fmt: skip
    """Mean gap against training time, a panel per problem of ``problems`` that has a run; one shared legend below
    the panels and a caption. Returns the figure (saved to ``path`` when given)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    pts = [s for s in summary if s["problem"] in problems and s["method"] != "optimizer"]
    pub = [p for p in published if p.get("method") == "Pinet" and PUBLISHED_PROBLEM.get(p["problem"]) in problems
           and p.get("rs_gap_of_means_pct") is not None and p.get("train_s") is not None]  # fmt: skip
    panels = [p for p in problems if any(s["problem"] == p for s in pts)]
    positive = [s["train_s"] for s in pts if s["train_s"] > 0] + [p["train_s"] for p in pub]
    floor = 10 ** math.floor(math.log10(min(positive) / 2)) if positive else 1.0  # where 0 s training is drawn
    has_zero = any(s["train_s"] <= 0 for s in pts)

    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 8), squeeze=False, dpi=130)
    assigned: dict[str, tuple[str, str]] = {}
    shown: list[str] = []
    labels: dict[Any, list[tuple]] = {}
    for ax, problem in zip(axes[0], panels):
        items = labels[ax] = []
        mine = [s for s in pts if s["problem"] == problem]
        per_label: dict[str, list] = defaultdict(list)
        for s in mine:
            per_label[s["label"]].append(s)
        for s in mine:
            colour, marker = style_of(s["label"], assigned)
            exact = s["ineq_worst"] == 0.0
            x = s["train_s"] if s["train_s"] > 0 else floor
            ax.errorbar(x, s["gap_mean"], yerr=s["gap_sd"], fmt=marker, color=colour, ms=7, capsize=2,
                        mfc=colour if exact else "white", mew=1.4, zorder=3)  # fmt: skip
            siblings = per_label[s["label"]]
            tag = []
            if len({x["epochs"] for x in siblings}) > 1:
                tag.append(f"{s['epochs']} ep")
            if len({x["lr"] for x in siblings}) > 1:
                tag.append(f"lr {s['lr']:g}")
            if not exact:
                tag.append(f"viol {_viol(s['ineq_worst'])}")
            items.append((x, s["gap_mean"], ", ".join(tag), colour, "normal", 7))
            if s["label"] not in shown:
                shown.append(s["label"])
        for p in (p for p in pub if PUBLISHED_PROBLEM[p["problem"]] == problem):
            colour = style_of("Pinet", assigned)[0]
            viol = p.get("ineq_max_abs_worst") or 0.0
            ax.plot(p["train_s"], p["rs_gap_of_means_pct"], PUBLISHED_MARKER, color=colour, ms=11,
                    mfc=colour if viol == 0.0 else "white", mew=1.2, zorder=4)  # fmt: skip
            back = {"implicit": "impl", "fixed_point": "fp", "unrolled": "unr"}.get(p["backward"], p["backward"])
            text = f"{back}/{(p.get('accuracy') or '')[:2]} {_viol(viol)}"
            items.append((p["train_s"], p["rs_gap_of_means_pct"], text, colour, "italic", 11))
        if any(s["train_s"] <= 0 for s in mine):
            ax.axvline(floor, color="0.6", lw=0.8, ls=":", zorder=1)
            ax.annotate("0 s: no training", (floor, 0), xycoords=("data", "axes fraction"), xytext=(3, 4),
                        textcoords="offset points", fontsize=6.5, color="0.4")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("training time, s (ours: shared, loaded 2-core CPU; published: Pinet's hardware)")
        ax.set_ylabel("mean optimality gap, % (error bar: sd over seeds)")
        kind = "convex QP" if "_qp_" in problem else "nonconvex" if "nonconvex" in problem else ""
        ax.set_title(f"{problem}  (DC3 {kind}, DC3's test split)", fontsize=10)
        ax.grid(True, which="major", lw=0.4, alpha=0.5)

    order = list(STYLE) + sorted(set(shown) - set(STYLE))
    handles = [Line2D([], [], ls="", marker=style_of(lab, assigned)[1], color=style_of(lab, assigned)[0], ms=7,
                      label=lab) for lab in order if lab in shown]  # fmt: skip
    if pub:
        handles.append(
            Line2D(
                [],
                [],
                ls="",
                marker=PUBLISHED_MARKER,
                color=style_of("Pinet", assigned)[0],
                ms=11,
                mfc="white",
                label=f"Pinet, published ({PUBLISHED_SOURCE})",
            )
        )
    handles += [
        Line2D([], [], ls="", marker="o", color="k", ms=7, label="filled: exactly feasible (worst ineq. violation 0)"),
        Line2D([], [], ls="", marker="o", color="k", mfc="white", ms=7,
               label="open: some inequality violated ('viol': the worst)"),
    ]  # fmt: skip
    caption = (
        "Each point: one (method, variant, epochs, lr, batch) group, mean over its seeds; annotation: the schedule "
        "where a method has several, and 'viol' the worst relative inequality violation over all seeds' test "
        "instances.\n"
        f"Published stars ({PUBLISHED_SOURCE}, its results .npz, same 50/50 instances and test split): gap of the "
        "mean objective to the mean optimum (their table's RS figure); label: backward (impl: implicit, fp: fixed "
        "point, unr: unrolled) / accuracy (hi, lo) and the worst absolute violation; training seconds on their "
        "hardware, not comparable in time.\n"
        + ("LDR (no training, 0 s) is drawn at the dotted line. " if has_zero else "")
        + "The optimizer (no training) is left out."
    )
    fig.subplots_adjust(left=0.06, right=0.98, top=0.95, bottom=0.3, wspace=0.2)
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.215), ncol=3, fontsize=8, frameon=False)
    fig.text(0.5, 0.01, caption, ha="center", va="bottom", fontsize=7.2, color="0.25", wrap=True)
    renderer = fig.canvas.get_renderer()
    fig.canvas.draw()
    for ax, items in labels.items():
        _place_labels(ax, items, renderer)
    if path:
        fig.savefig(path, dpi=130)
    return fig


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="*", default=list(DEFAULT_DIRS))
    parser.add_argument("--out", default="results/peers2026/summary.md")
    parser.add_argument("--nine-out", default="results/peers2026/nine.md")
    parser.add_argument("--figure", default=None)
    parser.add_argument("--no-published", action="store_true", help="leave Pinet's published points off the figure")
    args = parser.parse_args(argv)
    rows = load(args.dirs)
    summary = summarise(rows, PROBLEMS)
    text = markdown(summary)
    Path(args.out).write_text(text)
    print(text)
    nine = nine_markdown(rows)
    Path(args.nine_out).write_text(nine)
    print(nine)
    if args.figure:
        published = []
        if not args.no_published:
            from hardlinear.reporting.pinet_published import load_pinet_published

            published = load_pinet_published()
        figure(summary, args.figure, published)


if __name__ == "__main__":
    main()
