"""scripts/maintainers/ed_table.py (issue 42): the comparison table from records, with the inference benchmark's columns."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("ed_table", REPO / "scripts" / "maintainers" / "ed_table.py")
ed_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ed_table)


def _records() -> pd.DataFrame:
    base = {"test/eq_viol_worst": 1e-16, "test/time_ms": 1.0, "train/time_s": 10.0, "uncertainty": None, "status": "ok"}
    rows = [
        {**base, "problem": "ed_case30_ieee", "method": "e2elr", "variant": "", "seed": 0, "test/gap_mean": 0.9,
         "test/gap_worst": 5.0, "test/ineq_viol_worst": 0.0},
        {**base, "problem": "ed_case30_ieee", "method": "proposed", "variant": "output_scale", "seed": 0,
         "test/gap_mean": 1.0, "test/gap_worst": 3.0, "test/ineq_viol_worst": 0.0},
        {**base, "problem": "ed_case30_ieee", "method": "ldf", "variant": "", "seed": 0, "test/gap_mean": -5.0,
         "test/gap_worst": -1.0, "test/ineq_viol_worst": 2.0},
        {**base, "problem": "ed_case30_ieee", "method": "ldf", "variant": "", "seed": 1, "test/gap_mean": 1e8,
         "test/gap_worst": 1e8, "test/ineq_viol_worst": 2.0, "status": "diverged", "reason": "test gap beyond"},
    ]
    return pd.DataFrame(rows)


def test_the_best_is_the_lowest_mean_among_the_exactly_feasible_and_failures_are_listed():
    text = ed_table.table(_records())
    best = [line for line in text.splitlines() if "(best)" in line]
    assert len(best) == 1 and "| e2elr **(best)**" in best[0]  # LDF's lower (infeasible) gap is not the best
    assert "case30_ieee ldf seed 1: diverged (test gap beyond)" in text
    variant = _records().iloc[[3]].assign(variant="supervised", seed=2)
    assert "case30_ieee ldf (supervised) seed 2: diverged" in ed_table.table(pd.concat([_records(), variant]))


def test_the_benchmark_columns_join_on_case_method_and_variant():
    inference = {"rows": [
        {"case": "case30_ieee", "method": "proposed", "variant": "output_scale", "status": "ok", "batch1_ms": 0.5,
         "batch1024_us_per_instance": 4.25},
        {"case": "case30_ieee", "method": "proposed", "variant": "slack_repair=both", "status": "ok", "batch1_ms": 9.0,
         "batch1024_us_per_instance": 99.0},
    ]}
    lines = ed_table.table(_records(), inference).splitlines()
    assert lines[0].endswith("batch 1024 us / instance (bench) |")
    proposed = next(line for line in lines if "| proposed (output_scale)" in line)
    assert proposed.endswith("| 0.50 | 4.2 |")
    e2elr = next(line for line in lines if "| e2elr" in line)
    assert e2elr.endswith("| - | - |")  # no benchmark row for it: a dash, never another row's figure


def test_a_run_in_another_form_is_its_own_row_and_says_so():
    extra = _records().iloc[[1]].assign(form="inequality", **{"test/gap_mean": 0.5})
    text = ed_table.table(pd.concat([_records().assign(form="standard"), extra]))
    assert "| proposed (output_scale form=inequality) **(best)** | 1 | 0.5000 |" in text
    assert "| proposed (output_scale) | 1 | 1.0000 |" in text


def test_a_run_over_the_recipes_set_is_its_own_row_of_the_same_case():
    extra = _records().iloc[[1]].assign(**{"cfg.problem.input_set": "recipe", "test/gap_mean": 0.25})
    text = ed_table.table(pd.concat([_records(), extra]))
    assert "| case30_ieee | proposed (output_scale input_set=recipe) **(best)** | 1 | 0.2500 |" in text
    total = _records().iloc[[1]].assign(**{"cfg.problem.input_set": "recipe_total", "test/gap_mean": 0.3})
    assert "| case30_ieee | proposed (output_scale input_set=recipe_total) **(best)** | 1 | 0.3000 |" in ed_table.table(pd.concat([_records(), total]))
    assert "| case30_ieee | e2elr | 1 | 0.9000 |" in text


def test_the_proposed_variant_beside_e2elr_is_chosen_on_validation_among_the_most_seeds():
    """The variant with the lower validation gap is taken even where another has the lower test gap; a variant run
    at fewer seeds is not eligible; the verdict compares test means."""
    base = _records().iloc[[0, 1]].assign(form="standard", **{"val/gap_mean": 0.8})
    rows = [base.iloc[[0]]]
    for seed in (0, 1):
        rows.append(base.iloc[[1]].assign(seed=seed, variant="a", **{"val/gap_mean": 0.5, "test/gap_mean": 0.7}))
        rows.append(base.iloc[[1]].assign(seed=seed, variant="b", **{"val/gap_mean": 0.6, "test/gap_mean": 0.1}))
    rows.append(base.iloc[[1]].assign(seed=0, variant="c", **{"val/gap_mean": 0.01, "test/gap_mean": 0.01}))  # one seed
    text = ed_table.table(pd.concat(rows))
    line = next(x for x in text.splitlines() if x.startswith("| case30_ieee | 1, 0.9000"))
    assert "| a | 2 | 0.5000 | 0.7000 (3.0000) | proposed |" in line
    assert "Chosen on validation" not in ed_table.table(_records())  # no validation figures: no such table


def test_a_run_stopped_short_of_its_schedule_is_its_own_row_and_says_so():
    planned = {"cfg.problem.train.epochs": 100}
    full = _records().assign(**planned, **{"train/epochs": 100.0})
    short = full.iloc[[1]].assign(**{"train/epochs": 40.0, "test/gap_mean": 0.5})
    text = ed_table.table(pd.concat([full, short]))
    assert "| proposed (output_scale epochs=40 of 100) **(best)** | 1 | 0.5000 |" in text
    assert "| proposed (output_scale) | 1 | 1.0000 |" in text  # the full-schedule run keeps its own row
