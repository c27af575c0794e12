"""Figures of a study: training curves from the runs' epoch logs, zeros drawn at zero on symlog axes, no lone
dots, the study and trainer on every figure, the paper's points as references."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from hardlinear.reporting.figures import (
    _series,
    gap_time_figure,
    make_figures,
    paper_points,
    runs_frame,
    training_curves_figure,
    violation_figure,
)


def _write_run(run_dir, epochs, gap, viol):
    run_dir.mkdir(parents=True)
    rows = [{"epoch": e, "phase": "train", "train/loss": 1.0, "val/gap_mean": g, "val/ineq_viol_mean": v}
            for e, g, v in zip(epochs, gap, viol)]
    pd.DataFrame(rows).to_csv(run_dir / "epochs.csv", index=False)


@pytest.fixture
def runs(tmp_path):
    """A two-method, two-seed study on dcopf_14 with epoch logs: proposed feasible throughout (violation 0),
    DC3 violating; plus LDR, which has a single validation point."""
    records = []
    for method, seeds in (("proposed", (0, 1)), ("dc3", (0, 1)), ("ldr", (0,))):
        for seed in seeds:
            run_dir = tmp_path / f"{method}-{seed}"
            if method == "ldr":
                _write_run(run_dir, [0], [30.0], [0.0])
            elif method == "proposed":
                _write_run(run_dir, range(6), [40 - 5 * e + seed for e in range(6)], [0.0] * 6)
            else:
                _write_run(run_dir, range(6), [80 - 2 * e - seed for e in range(6)], [0.5 / (e + 1) + 0.01 * seed for e in range(6)])
            viol = 0.0 if method != "dc3" else 0.1 + 0.01 * seed
            records.append({
                "problem": "dcopf_14", "objective": "lp", "form": "standard", "method": method, "variant": "",
                "seed": seed, "pretrain_epochs": 2, "experiment": "smoke", "study": "smoke", "trainer": "fast",
                "run_dir": str(run_dir), "timestamp": f"2026-01-0{seed + 1}T00:00:00Z", "config_hash": f"{method}{seed}",
                "status": "ok", "test/gap_mean": 30.0 + seed, "test/gap_worst": 35.0, "test/eq_viol_mean": 1e-16,
                "test/eq_viol_worst": 2e-16, "test/ineq_viol_mean": viol, "test/ineq_viol_worst": 2 * viol,
                "test/time_ms": 0.5 if method != "dc3" else 20.0, "test/iterations": 1.0, "test/max_abs_viol": viol,
            })
    return pd.DataFrame(records)


def _suptitle(fig) -> str:
    return fig._suptitle.get_text() if fig._suptitle is not None else ""


def test_training_curves_bands_and_zero_on_symlog(runs):
    fig, missing = training_curves_figure(runs, "DC-OPF (LP) 14-bus system", "study: smoke  |  trainer: fast")
    assert missing == []
    gap_ax, viol_ax = fig.axes
    assert viol_ax.get_yscale() == "symlog" and -1e-10 < viol_ax.get_ylim()[0] <= 0.0
    lines = {line.get_label(): line for line in viol_ax.get_lines()}
    proposed = lines["Proposed (2 seeds)"]
    assert list(proposed.get_ydata()) == [0.0] * 6, "a zero violation must be drawn at 0, not at a floor"
    assert len(gap_ax.collections) >= 2  # min-max bands of the two methods with two seeds
    gap_lines = {line.get_label(): line for line in gap_ax.get_lines()}
    assert list(gap_lines["Proposed (2 seeds)"].get_ydata()) == [40.5 - 5 * e for e in range(6)]  # mean of seeds
    ldr = gap_lines["LDR (1 seed)"]  # one validation point: a marker with its value, not a lone dot
    assert ldr.get_linestyle() == "None" and ldr.get_marker() not in ("", "None", None)
    assert any(t.get_text() == "30" for t in gap_ax.texts)
    assert "study: smoke" in _suptitle(fig) and "trainer: fast" in _suptitle(fig)


def test_violation_bars_put_zero_at_zero(runs):
    series = _series(runs)
    fig = violation_figure(series, "t", "study: smoke  |  trainer: fast")
    eq_ax, ax = fig.axes  # equalities beside inequalities: a penalty's equality violation is not left out
    assert [a.get_title() for a in fig.axes] == ["equality", "inequality"]
    assert ax.get_yscale() == "symlog" and -1e-10 < ax.get_ylim()[0] <= 0.0
    labels = [t.get_text() for t in ax.get_xticklabels()]
    heights = [bar.get_height() for bar in ax.patches]
    mean_heights = dict(zip(labels, heights[: len(labels)]))
    worst_heights = dict(zip(labels, heights[len(labels):]))
    assert mean_heights["Proposed"] == 0.0 and mean_heights["LDR"] == 0.0
    assert math.isclose(mean_heights["DC3"], 0.105)
    assert math.isclose(worst_heights["DC3"], 0.22)  # the worst seed's worst (the table's), not the mean 0.21
    assert sum(t.get_text() == "0" for t in ax.texts) == 4  # proposed and LDR, mean and worst, labelled 0
    eq_heights = dict(zip([t.get_text() for t in eq_ax.get_xticklabels()], [b.get_height() for b in eq_ax.patches]))
    assert eq_heights["DC3"] == 1e-16  # drawn (below the linear threshold: labelled with its value)
    assert any(t.get_text() == "1e-16" for t in eq_ax.texts)


def test_a_lone_point_is_labelled_and_empty_panels_are_dropped(runs):
    one = runs[(runs["method"] == "ldr")]
    fig = gap_time_figure(_series(one), "t", "study: smoke")
    (ax,) = fig.axes
    assert any("LDR: 30.00 %" in t.get_text() for t in ax.texts)
    assert gap_time_figure(_series(one.assign(**{"test/time_ms": float("nan")})), "t") is None
    nolog = one.assign(run_dir=str(runs["run_dir"].iloc[0]) + "-absent")
    fig, missing = training_curves_figure(nolog, "t")
    assert fig is None and missing == [str(nolog["run_dir"].iloc[0])]


def test_paper_points_are_reference_markers(runs):
    ref = paper_points("dcopf_118", "lp")
    assert ref["Proposed"]["gap_mean"] > 0 and ref["DC3"]["time_ms"] > 0
    assert paper_points("portfolio", "lp")["Proposed"]["gap_mean"] == 2.35  # the paper prints it as QP
    reference = {"Proposed": {"gap_mean": 1.0, "time_ms": 2.0}, "APM": {"gap_mean": 0.5, "time_ms": 9.0}}
    fig = gap_time_figure(_series(runs), "t", "s", reference=reference)
    (ax,) = fig.axes
    hollow = [(list(line.get_xdata()), list(line.get_ydata())) for line in ax.get_lines() if line.get_markerfacecolor() == "none"]
    assert ([2.0], [1.0]) in hollow and ([9.0], [0.5]) in hollow
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "APM (paper only)" in legend and "hollow: the paper (other hardware)" in legend


def _write_records(runs):
    """Each run of ``runs`` as the record its run would have written (config: the study and the trainer)."""
    from hardlinear.harness import results

    for row in runs.to_dict("records"):
        config = {"study": row["study"], "experiment": row["experiment"], "trainer": {"name": row["trainer"]}, "seed": row["seed"]}
        body = {k: v for k, v in row.items() if k not in ("study", "trainer")}
        results.write_record(row["run_dir"], {"identity": row["config_hash"], "study": row["study"], "config": config,
                                              "status": "ok", "row": body})


def test_make_figures_from_records_selects_a_study(runs, tmp_path):
    _write_records(runs)
    frame = runs_frame([tmp_path])  # the loader's table: study and cfg.trainer.name from each record
    assert set(frame["study"]) == {"smoke"} and set(frame["trainer"]) == {"fast"}
    assert set(frame["run_dir"]) == set(runs["run_dir"])
    written = make_figures([tmp_path], tmp_path / "figs", study="smoke", formats=("png",))
    names = {p.name for p in written}
    assert names == {"captions.md"} | {f"dcopf_14_lp_{kind}.png" for kind in ("gap_time", "gap_violation", "violations", "training")}
    assert all(p.stat().st_size > 0 for p in written)
    captions = (tmp_path / "figs" / "captions.md").read_text().splitlines()
    assert sum("(study: smoke  |  trainer: fast)" in line for line in captions) == 4
    with pytest.raises(ValueError, match="no ok runs of study 'other'.*studies with some: smoke"):
        make_figures([tmp_path], tmp_path / "figs", study="other", formats=("png",))
    assert set(runs_frame([tmp_path], where={"method": "dc3"})["method"]) == {"dc3"}  # WHERE= filters the loader


def test_legacy_csv_study_draws_without_training_curves_and_says_so(runs, tmp_path):
    folder = tmp_path / "paper"
    folder.mkdir()
    legacy = runs.drop(columns=["study", "trainer"]).assign(run_dir=[str(tmp_path / "gone" / str(i)) for i in range(len(runs))])
    legacy.to_csv(folder / "runs.csv", index=False)
    written = make_figures(folder / "runs.csv", tmp_path / "figs", study="paper", formats=("png",))
    names = {p.name for p in written}
    assert names == {"captions.md", "dcopf_14_lp_gap_time.png", "dcopf_14_lp_gap_violation.png", "dcopf_14_lp_violations.png"}  # no curves to draw
    captions = (tmp_path / "figs" / "captions.md").read_text()
    assert "trainer: not recorded" in captions  # a legacy row stores no config
    assert f"no training curves for {len(runs)} run(s) without an `epochs.csv`" in captions


def test_subtitle_says_the_schedule_the_runs_had(runs, tmp_path):
    """Issue 44: ``trainer: default`` alone when every run had ``trainer.epochs=100`` misled; the subtitle names the
    epochs and a budget (with how many runs had it) from the runs' configs."""
    from hardlinear.harness import results

    for row in runs.to_dict("records"):
        trainer = {"name": "default", "epochs": 100, **({"time_budget_s": 120} if row["method"] == "dc3" else {})}
        config = {"study": row["study"], "experiment": row["experiment"], "trainer": trainer, "seed": row["seed"]}
        body = {k: v for k, v in row.items() if k not in ("study", "trainer")}
        results.write_record(row["run_dir"], {"identity": row["config_hash"], "study": row["study"], "config": config,
                                              "status": "ok", "row": body})
    make_figures([tmp_path], tmp_path / "figs", study="smoke", formats=("png",))
    captions = (tmp_path / "figs" / "captions.md").read_text()
    assert "(study: smoke  |  trainer: default, 100 epochs, budget 120 s (2 of 5 runs))" in captions


def test_a_method_without_an_ok_run_is_named_and_paper_markers_only_where_the_paper_has_them(runs, tmp_path):
    """Issue 44: a not-applicable method vanished from the figures unsaid, and captions promised the paper's grey
    markers on a problem the paper never ran."""
    from hardlinear.harness import results

    _write_records(runs)
    mine = runs.iloc[0].to_dict()
    na = {k: mine[k] for k in results.IDENTITY_COLUMNS if k in mine}
    na.update({"method": "hardnet_aff", "config_hash": "na0", "run_dir": str(tmp_path / "na0")})
    results.write_record(tmp_path / "na0", {"identity": "na0", "study": "smoke", "status": "not_applicable",
                                            "reason": "HardNet-Aff needs at most n constraint rows", "row": na,
                                            "config": {"study": "smoke", "trainer": {"name": "fast"}}})
    make_figures([tmp_path], tmp_path / "figs", study="smoke", formats=("png",))
    captions = (tmp_path / "figs" / "captions.md").read_text()
    assert "Not drawn (no ok run): HardNet-Aff: not applicable (HardNet-Aff needs at most n constraint rows)." in captions
    assert "Hollow markers: the paper's figures" in captions  # dcopf_14 LP is in the paper's tables
    mine_only = runs.assign(problem="my_problem")
    for i, row in enumerate(mine_only.to_dict("records")):
        row["run_dir"] = str(tmp_path / "mine" / str(i))
        mine_only.loc[mine_only.index[i], "run_dir"] = row["run_dir"]
    _write_records(mine_only.assign(study="own"))
    make_figures([tmp_path], tmp_path / "own", study="own", formats=("png",))
    own = (tmp_path / "own" / "captions.md").read_text()
    assert "the paper" not in own and "Grey ticks" not in own and "Not drawn" not in own


def test_gap_time_legend_flags_the_overall_worst_violation(runs):
    fig = gap_time_figure(_series(runs), "t", "s", absent=["HardNet-Aff: not applicable"])
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "DC3 (2) INFEASIBLE, worst viol. 2.2e-01" in legend  # max over seeds, as the table; the mean would be 2.1e-01
    assert "not drawn: HardNet-Aff: not applicable" in legend


def test_training_curves_legend_sits_outside_the_panels(runs):
    fig, _ = training_curves_figure(runs, "t", "s")
    assert all(ax.get_legend() is None for ax in fig.axes) and len(fig.legends) == 1
    assert "hollow diamonds" not in _suptitle(fig)  # no paper reference given: no diamonds promised


def test_gap_time_rings_an_infeasible_method_over_its_own_marker_and_clips_none(runs):
    """Issue 60 item 5: every method keeps its own colour and marker, an infeasible one gets a red ring on top of it
    (before: one shared red X over every infeasible method, its own marker hidden), and no marker or ring crosses
    the axes' edge, even at the data's corners (two infeasible methods sit at the extreme time and gap)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import to_rgba

    from hardlinear.reporting.figures import MARKERS

    corners = []
    for method, time_ms, gap in (("penalty", 400.0, 95.0), ("apm", 0.01, -20.0)):
        row = runs[runs["method"] == "dc3"].iloc[0].to_dict()
        corners.append({**row, "method": method, "seed": 0, "config_hash": method, "test/time_ms": time_ms,
                        "test/gap_mean": gap, "test/ineq_viol_worst": 0.3})
    fig = gap_time_figure(_series(pd.concat([runs, pd.DataFrame(corners)])), "t", "s")
    FigureCanvasAgg(fig).draw()
    ax = fig.axes[0]
    red = to_rgba("red")
    own = [ln for ln in ax.lines if ln.get_marker() in MARKERS and ln.get_markerfacecolor() != "none"]
    rings = [ln for ln in ax.lines if ln.get_markerfacecolor() == "none" and to_rgba(ln.get_markeredgecolor()) == red]
    assert len(own) == 5 and len({(ln.get_marker(), to_rgba(ln.get_color())) for ln in own}) == 5
    assert all(to_rgba(ln.get_color()) != red for ln in own)
    points = {tuple(ln.get_xydata()[0]): ln for ln in own}
    assert len(rings) == 3  # DC3, penalty, APM
    for ring in rings:
        below = points[tuple(ring.get_xydata()[0])]  # over a method's own marker, drawn after it
        assert ring.get_zorder() > below.get_zorder() and ring.get_markersize() > below.get_markersize()
    box = ax.bbox
    for ln in own + rings:
        x, y = ax.transData.transform(ln.get_xydata()[0])
        r = (ln.get_markersize() / 2 + ln.get_markeredgewidth()) * fig.dpi / 72
        assert box.x0 <= x - r and x + r <= box.x1 and box.y0 <= y - r and y + r <= box.y1, (ln.get_marker(), x, y, r, box)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(text.startswith("red ring: infeasible") for text in legend)
