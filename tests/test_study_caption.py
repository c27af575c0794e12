"""Issue 44 item 7: the study table's caption calls shared only the settings every run had; a setting some runs had
(``trainer.resume`` in 1 run of 3) is listed apart, with how many runs had each value."""

from __future__ import annotations

from pathlib import Path

from test_tables import _row

from hardlinear.harness import results
from hardlinear.reporting.study_table import build_study_table, default_settings

CONF = Path(__file__).resolve().parents[1] / "conf"


def _study(tmp_path: Path, trainers: list[dict]):
    for seed, trainer in enumerate(trainers):
        row = _row("dcopf_118", "lp", "proposed", seed, "")
        config = {"seed": seed, "problem": {"name": "dcopf_118"}, "method": {"name": "proposed"}, "trainer": trainer}
        results.write_record(tmp_path / f"run{seed}", {"identity": row["config_hash"], "study": "s", "status": "ok",
                                                       "reason": "", "row": row, "config": config})
    return results.report_table([str(tmp_path)])


def test_a_setting_one_run_had_is_not_called_shared(tmp_path):
    fast = {"name": "fast", "epochs": 4, "lr": 0.001, "resume": None}
    df = _study(tmp_path, [fast, {**fast, "resume": "runs/x"}, {**fast, "lr": 0.01}])
    table, _ = build_study_table(df, "s", default_settings(CONF))
    shared, _, varying = table.caption.partition(" Settings that differ between its runs: ")
    assert "trainer.name=fast" in shared and "trainer.epochs=4" in shared
    assert "resume" not in shared and "trainer.lr" not in shared
    assert "trainer.resume: runs/x (1 run), unset (2 runs)" in varying
    assert "trainer.lr: 0.001 (2 runs), 0.01 (1 run)" in varying


def test_no_varying_part_when_every_run_agrees(tmp_path):
    df = _study(tmp_path, [{"name": "fast", "epochs": 4}] * 2)
    table, _ = build_study_table(df, "s", default_settings(CONF))
    assert "differ between" not in table.caption
    assert "trainer.epochs=4" in table.caption and "trainer.name=fast" in table.caption
