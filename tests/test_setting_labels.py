"""Issue 60 item 2: labels say what differed. A study whose rows differ in a trainer setting (one method at two
learning rates; two variants of a method, each with its own batch size and batch norm) names that setting in every
row's label in the table, the figures' legends and subtitle and the HTML page; and ``method=proposed_refined`` runs
under its own name (before, it inherited ``name: proposed`` and logged, named its folder and reported as ``proposed``).
"""

from __future__ import annotations

import re
from pathlib import Path

from test_tables import _row

from hardlinear.harness import results
from hardlinear.reporting import figures
from hardlinear.reporting.html_report import study_report
from hardlinear.reporting.study_table import build_study_table, default_settings

CONF = Path(__file__).resolve().parents[1] / "conf"


def _record(root: Path, i: int, method: str, variant: str, seed: int, trainer: dict, network: dict, gap: float) -> None:
    row = _row("dcopf_118", "lp", method, seed, "", variant=variant, ts=f"2025-03-01T00:00:{i:02d}Z", **{"test/gap_mean": gap})
    config = {"seed": seed, "problem": {"name": "dcopf_118"}, "method": {"name": method, "rule_objective": variant or "margin"},
              "trainer": {"name": "default", "epochs": 60, **trainer}, "network": {"hidden": 256, **network}}
    results.write_record(root / f"run{i}", {"identity": row["config_hash"], "study": "s", "status": "ok", "reason": "",
                                            "row": row, "config": config})


def _study(tmp_path: Path):
    paper = {"lr": 0.0001, "batch_size": 64}, {"batch_norm": True}
    tuned = {"lr": 0.001, "batch_size": 256}, {"batch_norm": False}
    i = 0
    for seed in (0, 1):  # the margin rule at both trainers; the cost rule at the tuned one only
        for variant, (trainer, network), gap in (("", paper, 8.7), ("", tuned, 0.5), ("rule=cost", tuned, 0.34)):
            _record(tmp_path, i, "proposed", variant, seed, trainer, network, gap + 0.01 * seed)
            i += 1
    _record(tmp_path, i, "ldr", "", 0, *paper, 20.0)
    return results.report_table([str(tmp_path)])


DIFFER = ("network.batch_norm", "trainer.batch_size", "trainer.lr")


def _expected(batch_norm: str, batch: int, lr: str) -> str:
    return f"[network.batch_norm={batch_norm}, trainer.batch_size={batch}, trainer.lr={lr}]"


def test_every_row_label_names_the_trainer_settings_that_differ(tmp_path):
    table, tidy = build_study_table(_study(tmp_path), "s", default_settings(CONF))
    labels = [row[0].text for block in table.blocks for row in block.rows]
    assert labels == [
        f"Proposed {_expected('false', 256, '0.001')}", f"Proposed {_expected('true', 64, '0.0001')}",
        f"Proposed (rule=cost) {_expected('false', 256, '0.001')}", f"LDR {_expected('true', 64, '0.0001')}",
    ]
    seeds = {r["label"]: r["seeds"] for r in tidy}
    assert seeds[labels[0]] == 2 and seeds[labels[1]] == 2  # one row per setting, each over its own seeds


def test_the_figures_name_them_in_legend_and_subtitle(tmp_path):
    runs = figures.runs_frame(_study(tmp_path))
    subtitle = figures._subtitle(runs, "s")
    assert f"rows differ in {', '.join(DIFFER)}" in subtitle
    series = figures._series(runs)  # before: MixedSettings (one method, two learning rates), so no figure at all
    fig = figures.gap_time_figure(series, "t", subtitle)
    legend = [" ".join(t.get_text().split()) for t in fig.axes[0].get_legend().get_texts()]  # long entries wrap
    assert f"Proposed {_expected('true', 64, '0.0001')} (2)" in legend
    assert f"Proposed (rule=cost) {_expected('false', 256, '0.001')} (2)" in legend
    fig = figures.gap_violation_figure(runs, "t", subtitle)
    legend = [" ".join(t.get_text().split()) for t in fig.axes[0].get_legend().get_texts()]
    assert f"LDR {_expected('true', 64, '0.0001')} (1)" in legend


def test_the_page_shows_them_in_table_and_figures(tmp_path):
    page = study_report(_study(tmp_path), "s", default_settings(CONF))
    assert "No figures" not in page
    assert page.count(_expected("false", 256, "0.001")) >= 2  # the two tuned rows of the table
    cells = re.findall(r"<tr[^>]*><td>([^<]*)</td>", page.split('id="runs"')[0])
    assert all("trainer.lr=" in c for c in cells), cells


def test_proposed_refined_runs_under_its_own_name():
    from hydra import compose, initialize_config_dir

    from hardlinear.harness.rundirs import register_resolvers

    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose("config", overrides=["method=proposed_refined"], return_hydra_config=True)
        plain = compose("config", overrides=["method=proposed"], return_hydra_config=True)
    assert cfg.method.name == "proposed_refined" and cfg.method.refine == "dr"
    assert plain.method.name == "proposed"
    assert "/proposed_refined/" in cfg.hydra.run.dir and "/proposed/" in plain.hydra.run.dir  # the run folder


def test_the_peer_tables_still_file_a_refined_run_under_proposed_refined():
    from hardlinear.reporting.peer_cells import REFINED, slot_of

    assert slot_of({"method": "proposed_refined", "cfg.method.refine": "dr"}) == REFINED
    assert slot_of({"method": "proposed", "cfg.method.refine": "dr"}) == REFINED  # records before the rename
    assert slot_of({"method": "proposed", "cfg.method.refine": "none"}) == "proposed"
