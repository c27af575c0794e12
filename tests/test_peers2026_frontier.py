"""scripts/maintainers/peers2026_frontier.py on synthetic records: the grouping (a batch-256 run is not averaged into a batch-64
one, a run found twice counts once), the labels (the recommended refined setting by its trainer, not its variant),
the per-dataset table's bold and its empty cells, and the figure: one legend outside every panel, Pinet's published
points drawn as stars, no-training runs placed on the log axis."""

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("peers2026_frontier", REPO / "scripts" / "maintainers" / "peers2026_frontier.py")
fr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fr)

QP, NCVX = "dc3_qp_eq50_ineq50", "dc3_nonconvex_eq50_ineq50"
REFINED = "refine=dr(10/50 steps, sigma=0.3) rule=cost0.5"


def row(problem, method, seed, gap=1.0, variant="", epochs=300, lr=1e-4, batch=64, sampling="batches", refine=None,
        gradient="argmax", ineq=0.0, train_s=100.0, status="ok", reason=""):  # fmt: skip
    r = {"problem": problem, "method": method, "seed": seed, "variant": variant, "status": status, "reason": reason,
         "lr": lr, "schedule_epochs": epochs, "batch_size": batch, "sampling": sampling, "refine": refine,
         "gradient": gradient, "record": f"/nowhere/{problem}-{method}-{seed}"}  # fmt: skip
    if status == "ok":
        r.update({"test/gap_mean": gap, "test/gap_worst": 3 * gap, "test/ineq_viol_worst": ineq,
                  "test/eq_viol_worst": 1e-14, "train/time_s": train_s, "train/epochs": float(epochs)})  # fmt: skip
    return r


def recommended(problem, seed, gap=0.01):
    return row(problem, "proposed", seed, gap, REFINED, epochs=200, lr=1e-3, batch=256, sampling="pass", refine="dr",
               train_s=300.0)  # fmt: skip


def older(problem, seed, gap=0.15, epochs=300):
    return row(problem, "proposed", seed, gap, REFINED, epochs=epochs, refine="dr", train_s=90.0)


def test_labels():
    assert fr.label(recommended(QP, 0)) == fr.RECOMMENDED
    assert fr.label(older(QP, 0)) == "proposed, refined (10/50 DR steps)"
    pick = row(QP, "proposed", 0, variant="refine=dr(10/50 steps, sigma=0.3) pick=objective", refine="dr")
    assert fr.label(pick) == "proposed, refined (10/50 DR steps, pick=objective)"
    assert fr.label(row(QP, "proposed", 0, variant="rule=cost0.5")) == "proposed"
    assert fr.label(row(QP, "proposed", 0, variant="gradient=ste rule=cost0.5", gradient="ste")) == (
        "proposed, STE gradient"
    )
    assert fr.label(row(QP, "hardnet_aff", 0)) == "HardNet-Aff"
    assert fr.label(row(QP, "projection_layer", 0, variant="Clarabel")) == "projection layer (Clarabel)"
    # the same variant, batch 256 but a batches-per-epoch sampler: not the recommended setting
    assert fr.label({**recommended(QP, 0), "sampling": "batches"}) == "proposed, refined (10/50 DR steps)"


def test_grouping_keeps_trainers_apart():
    rows = [recommended(QP, s, 0.01 + s * 0.01) for s in range(3)] + [older(QP, s) for s in range(3)]
    rows += [older(QP, s, 0.3, epochs=100) for s in range(2)] + [row("dcopf_14", "proposed", 0)]
    rows += [row(QP, "pinet", 0, status="error", reason="boom")]
    summary = fr.summarise(rows, fr.PROBLEMS)
    assert [(s["label"], s["epochs"], s["n_seeds"]) for s in summary] == [
        ("proposed, refined (10/50 DR steps)", 100, 2),
        (fr.RECOMMENDED, 200, 3),
        ("proposed, refined (10/50 DR steps)", 300, 3),
    ]
    rec = summary[1]
    assert rec["gap_mean"] == pytest.approx(0.02) and rec["gap_sd"] == pytest.approx(0.01)
    assert rec["seeds"] == "0,1,2" and rec["batch_size"] == 256 and rec["gap_worst"] == pytest.approx(0.09)


def test_load_dedups_identity_and_keeps_failures(tmp_path):
    def write(folder, identity, status="ok", row_=None):
        d = tmp_path / folder
        d.mkdir(parents=True)
        cfg = {"trainer": {"lr": 1e-3, "epochs": 200, "batch_size": 256, "sampling": "pass"},
               "method": {"name": "proposed", "refine": "dr", "gradient": "argmax"}}  # fmt: skip
        rec = {"identity": identity, "status": status, "reason": "" if status == "ok" else "needs rank; more",
               "config": cfg, "row": row_ or {}}  # fmt: skip
        (d / "record.json").write_text(json.dumps(rec))

    r = recommended(QP, 0)
    write("a/frontier/x", "id0", row_=r)
    write("b/copy", "id0", row_=r)
    write("a/nine/y", "id1", status="error", row_={"problem": QP, "method": "hardnet_aff"})
    rows = fr.load([str(tmp_path / "a"), str(tmp_path / "b")])
    assert len(rows) == 2
    ok = [x for x in rows if x["status"] == "ok"]
    assert len(ok) == 1 and fr.is_recommended(ok[0]) and ok[0]["batch_size"] == 256


def test_nine_table_bold_and_empty_cells():
    rows = [recommended(QP, s, 0.05) for s in range(3)] + [older(QP, s, 0.15) for s in range(3)]
    rows += [row(QP, "pinet", s, 0.02, epochs=50, lr=1e-2, batch=2048, ineq=1e-3) for s in range(3)]
    rows += [row(QP, "hardnet_aff", 0, status="error", reason="HardNet-Aff needs [H; G] full row rank; this form")]
    rows += [row(QP, "proposed", s, 0.9, "rule=cost0.5") for s in range(3)]  # plain proposed: not a table row
    text = fr.nine_markdown(rows, problems=(QP,))
    lines = text.splitlines()
    assert any(ln.startswith("| Pinet |") and "**0.02 ± 0**" in ln for ln in lines)  # best overall
    assert any(ln.startswith(f"| {fr.RECOMMENDED} |") and "***0.05 ± 0***" in ln for ln in lines)  # best feasible
    assert any(ln.startswith("| HardNet-Aff | not run: HardNet-Aff needs [H; G] full row rank (1 records)")
               for ln in lines)  # fmt: skip
    assert any(ln.startswith("| FSNet | no record") for ln in lines)
    assert not any(ln.startswith("| proposed |") for ln in lines)


def test_figure_legend_outside_and_published_drawn(tmp_path):
    rows = [recommended(QP, s) for s in range(2)] + [older(NCVX, s) for s in range(2)]
    rows += [row(QP, "ldr", 0, 60.0, train_s=0.0), row(QP, "optimizer", 0, 1e-16, train_s=0.0)]
    rows += [row(p, "fsnet", 0, 0.3, ineq=1e-6, train_s=300.0) for p in (QP, NCVX)]
    published = [
        {"problem": "dc3_qp", "method": "Pinet", "backward": "implicit", "accuracy": "high",
         "rs_gap_of_means_pct": 0.3, "train_s": 69.0, "ineq_max_abs_worst": 2e-3},
        {"problem": "dc3_nonconvex", "method": "Pinet", "backward": "unrolled", "accuracy": "low",
         "rs_gap_of_means_pct": 2.0, "train_s": 130.0, "ineq_max_abs_worst": 5e-2},
        {"problem": "dc3_qp", "method": "DC3 (Pinet's run)", "backward": None, "accuracy": None,
         "rs_gap_of_means_pct": 10.0, "train_s": 385.0, "ineq_max_abs_worst": 7e-2},
    ]  # fmt: skip
    path = tmp_path / "frontier.png"
    fig = fr.figure(fr.summarise(rows, fr.PROBLEMS), str(path), published)
    assert path.stat().st_size > 0
    assert len(fig.legends) == 1 and all(ax.get_legend() is None for ax in fig.axes)
    renderer = fig.canvas.get_renderer()
    legend_box = fig.legends[0].get_window_extent(renderer)
    assert len(fig.axes) == 2
    assert not any(legend_box.overlaps(ax.get_window_extent(renderer)) for ax in fig.axes)
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert fr.RECOMMENDED in texts and "proposed, refined (10/50 DR steps)" in texts and "optimizer" not in texts
    assert any("published" in t and "e662b15" in t for t in texts)
    for ax in fig.axes:  # one Pinet star on each panel; DC3's published run is not Pinet's
        stars = [ln for ln in ax.get_lines() if ln.get_marker() == fr.PUBLISHED_MARKER]
        assert len(stars) == 1
        assert ax.get_xscale() == "log"
    qp = fig.axes[0]
    annotations = [c.get_text() for c in qp.texts]
    assert "viol 1e-6" in annotations and any("impl/hi" in a for a in annotations)
    assert any("0 s" in a for a in annotations)  # LDR at the floor, said so
    xs = [x for ln in qp.get_lines() for x in ln.get_xdata()]
    assert min(xs) > 0
    import matplotlib.pyplot as plt

    plt.close(fig)
