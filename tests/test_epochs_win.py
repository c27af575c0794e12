"""Issue 60 item 9: an explicit ``trainer.epochs`` wins over a pre-training schedule, methods that do not pre-train
ignore it, and a run a time budget stopped says so in whole epochs.

Before: ``problem=ed ... method=e2elr,ldf,proposed trainer.epochs=30`` refused all three runs ("trainer.pretrain_epochs
(100) cannot exceed trainer.epochs (30)"), and FSNet's budget-stopped runs read "13.2" epochs in the tables."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from test_tables import _row

from hardlinear.harness import results
from hardlinear.harness.pretraining import fit_pretraining, method_pretrains
from hardlinear.harness.rundirs import register_resolvers
from hardlinear.harness.schemas import ConfigError, validate_config
from hardlinear.reporting.stats import epochs_text
from hardlinear.reporting.study_table import build_study_table

CONF = Path(__file__).resolve().parents[1] / "conf"


def _cfg(overrides: list[str]):
    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose("config", overrides=overrides)


@pytest.mark.parametrize("method, pretrains", [("proposed", True), ("proposed_refined", True), ("proposed_nopretrain", False),
                                               ("e2elr", False), ("ldf", False), ("ldr", False), ("penalty", False), ("dc3", False)])
def test_which_methods_pretrain(method, pretrains):
    assert method_pretrains(_cfg([f"method={method}"]).method) is pretrains


@pytest.mark.parametrize("method", ["e2elr", "ldf", "proposed"])  # the sweep (proposed on ED: pretrain=false)
def test_a_method_that_does_not_pretrain_is_not_refused(method):
    overrides = ["problem=ed", "problem.case=pglib_opf_case118_ieee", f"method={method}", "trainer.epochs=30"]
    cfg = _cfg(overrides)
    assert fit_pretraining(cfg, overrides) == "" and cfg.trainer.pretrain_epochs == 100  # its config as composed
    validate_config(cfg)  # before: ConfigError, pretrain_epochs (100) cannot exceed epochs (30)


def test_an_explicit_epochs_cuts_pretraining_to_the_schedules_share_and_says_so():
    overrides = ["problem=dcopf_118", "method=proposed", "trainer=default", "trainer.epochs=30"]  # the paper's schedule
    cfg = _cfg(overrides)
    with pytest.raises(ConfigError, match=r"pretrain_epochs \(100\) cannot exceed trainer.epochs \(30\)"):
        validate_config(cfg)  # as composed, the schedule's 100 pre-training epochs do not fit
    note = fit_pretraining(cfg, overrides)
    assert cfg.trainer.pretrain_epochs == 10 and cfg.trainer.epochs == 30  # 100 of 300 -> 10 of 30
    assert note == ("trainer.epochs=30 is below the schedule's pretrain_epochs=100: pre-training takes the schedule's "
                    "share (100 of 300), 10 of the 30 epochs (set trainer.pretrain_epochs=N to choose)")
    validate_config(cfg)


def test_both_set_and_contradictory_is_still_refused():
    overrides = ["method=proposed", "trainer.epochs=30", "trainer.pretrain_epochs=50"]
    cfg = _cfg(overrides)
    assert fit_pretraining(cfg, overrides) == ""
    with pytest.raises(ConfigError, match=r"pretrain_epochs \(50\) cannot exceed trainer.epochs \(30\)"):
        validate_config(cfg)


def test_no_epochs_on_the_command_line_changes_nothing():
    cfg = _cfg(["method=proposed", "trainer=default"])
    assert fit_pretraining(cfg, ["method=proposed", "trainer=default"]) == "" and cfg.trainer.pretrain_epochs == 100
    cfg = _cfg(["method=proposed"])  # the method's own trainer (conf/trainer/tuned.yaml): 20 epochs of pre-training
    assert fit_pretraining(cfg, ["method=proposed"]) == "" and cfg.trainer.pretrain_epochs == 20


def test_epochs_text_says_the_budget_stopped_it_in_whole_epochs():
    assert epochs_text([300.0, 300.0]) == "300"
    assert epochs_text([13.2, 13.6, 13.0], [1.0, 1.0, 1.0]) == "stopped on its budget after 13 epochs"
    assert epochs_text([13.2, 14.5], [True, True]) == "stopped on its budget after 13-14 epochs"
    assert epochs_text([13.2, 500.0], [1.0, 0.0]) == "stopped on its budget after 13 epochs (1 of 2 seeds)"


def test_the_study_table_says_stopped_on_its_budget(tmp_path):
    for seed, done in enumerate((13.2, 13.4)):
        row = _row("dcopf_118", "lp", "fsnet", seed, "", **{"train/epochs": done, "train/budget_spent": 1.0})
        config = {"seed": seed, "problem": {"name": "dcopf_118"}, "method": {"name": "fsnet"},
                  "trainer": {"epochs": 500, "time_budget_s": 120}}
        results.write_record(tmp_path / f"run{seed}", {"identity": row["config_hash"], "study": "s", "status": "ok",
                                                       "reason": "", "row": row, "config": config})
    table, _ = build_study_table(results.report_table([str(tmp_path)]), "s")
    (row,) = table.blocks[0].rows
    assert row[table.columns.index("Epochs")].text == "stopped on its budget after 13 epochs"
