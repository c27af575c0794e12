"""The field's gap statistics (issue 58, item 3): the shifted geometric mean with a 1 % shift (Chen, Tanneau, Van
Hentenryck, IEEE TPWRS 2024), the median, 95th and 99th percentiles in every record, the per-instance gaps and
violations in ``per_instance.csv`` beside it, in the study table and in W&B's summary."""

import csv
import math

import numpy as np
import pandas as pd
import pytest
from test_faults import compose_cfg
from test_loggers import _items, finished_records, wandb_env  # noqa: F401 - wandb_env is a fixture

from hardlinear.evaluation.metrics import gap_statistics, shifted_geometric_mean, summarize
from hardlinear.harness import results
from hardlinear.harness.runner import run
from hardlinear.reporting.study_table import COLUMNS, build_study_table


def test_the_shifted_geometric_mean_by_hand():
    # (0 + 1)(1 + 1)(3 + 1) = 8, whose cube root is 2: SGM = 2 - 1 = 1 %, where the mean is 1.33 %
    assert shifted_geometric_mean(np.array([0.0, 1.0, 3.0])) == pytest.approx(1.0, rel=1e-15)
    assert shifted_geometric_mean(np.array([0.5])) == pytest.approx(0.5, rel=1e-15)
    assert shifted_geometric_mean(np.array([0.0, 0.0])) == 0.0
    # one large gap moves it far less than the mean: (1)(1)(1)(100)^(1/4) - 1 = sqrt(10) - 1
    assert shifted_geometric_mean(np.array([0.0, 0.0, 0.0, 99.0])) == pytest.approx(math.sqrt(10.0) - 1.0, rel=1e-14)
    for undefined in ([-1.0, 2.0], [-5.0], [np.nan, 1.0], []):
        assert math.isnan(shifted_geometric_mean(np.array(undefined)))


def test_every_summary_carries_the_statistics():
    gap = np.arange(101, dtype=float)  # 0, 1, ..., 100 %
    stats = gap_statistics(gap, "val")
    assert stats["val/gap_median"] == 50.0 and stats["val/gap_p95"] == 95.0 and stats["val/gap_p99"] == 99.0
    zeros = np.zeros(101)
    out = summarize({"gap": gap, "eq_viol": zeros, "ineq_viol": zeros, "max_abs_viol": zeros}, "test")
    assert {"test/gap_sgm", "test/gap_median", "test/gap_p95", "test/gap_p99"} <= set(out)
    assert out["test/gap_worst"] == 100.0 and out["test/gap_sgm"] < out["test/gap_mean"] == 50.0


def test_a_run_records_the_statistics_writes_its_instances_and_tells_wandb(wandb_env):  # noqa: F811 - the fixture
    cfg = compose_cfg(wandb_env, "problem=dcopf_14", "method=proposed", "trainer=fast", "logger=wandb",
                      "data.test_size=24")
    run_dir = wandb_env / "run"
    row = run(cfg, run_dir)
    with open(run_dir / results.PER_INSTANCE_FILE, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 24 and [int(r["instance"]) for r in rows] == list(range(24))
    gap = np.array([float(r["gap"]) for r in rows])
    ref = np.array([float(r["ref_objective"]) for r in rows])
    objective = np.array([float(r["objective"]) for r in rows])
    np.testing.assert_allclose(gap, 100.0 * (objective - ref) / np.abs(ref), rtol=1e-12, atol=1e-12)
    record = results.read_record(run_dir / results.RECORD_FILE)["row"]
    assert record["test/gap_mean"] == pytest.approx(gap.mean(), rel=1e-12)
    assert record["test/gap_worst"] == pytest.approx(gap.max(), rel=1e-12)
    assert record["test/gap_sgm"] == pytest.approx(math.exp(np.mean(np.log(gap + 1.0))) - 1.0, rel=1e-9)
    assert record["test/gap_p95"] == pytest.approx(np.percentile(gap, 95), rel=1e-12)
    assert record["test/ineq_viol_worst"] == pytest.approx(max(float(r["ineq_viol"]) for r in rows), rel=1e-12, abs=1e-300)
    assert row["test/gap_median"] == record["test/gap_median"]

    (wandb_file,) = (run_dir / "wandb").glob("offline-run-*/run-*.wandb")
    summary = {}
    for r in finished_records(wandb_file):
        if r.WhichOneof("record_type") == "summary":
            summary.update(_items(r.summary.update))
    for key in ("test/gap_sgm", "test/gap_median", "test/gap_p95", "test/gap_p99"):
        assert summary[key] == pytest.approx(record[key], rel=1e-12)


def _row(seed: int, **metrics) -> dict:
    return {"problem": "ed_case14_ieee", "objective": "lp", "form": "standard", "uncertainty": "", "problem_sha256": "",
            "method": "e2elr", "variant": "", "seed": seed, "status": "ok", "reason": "", "timestamp": f"t{seed}",
            "config_hash": f"h{seed}", "test/gap_mean": 1.0, "test/gap_worst": 3.0, **metrics}


def test_the_study_table_shows_them_and_a_dash_for_older_records():
    new = pd.DataFrame([_row(0, **{"test/gap_sgm": 0.5, "test/gap_median": 0.4, "test/gap_p95": 2.0, "test/gap_p99": 2.5}),
                        _row(1, **{"test/gap_sgm": 0.7, "test/gap_median": 0.6, "test/gap_p95": 2.2, "test/gap_p99": 2.9})])
    table, tidy = build_study_table(new, "s")
    (cells,) = [row for block in table.blocks for row in block.rows]
    texts = dict(zip(COLUMNS, (c.text for c in cells)))
    assert texts["Gap SGM % (1 % shift)"] == "0.6" and texts["Gap median / p95 / p99 %"] == "0.5 / 2.1 / 2.7"
    assert tidy[0]["test/gap_sgm mean"] == pytest.approx(0.6)
    old, _ = build_study_table(pd.DataFrame([_row(0)]), "s")
    (cells,) = [row for block in old.blocks for row in block.rows]
    texts = dict(zip(COLUMNS, (c.text for c in cells)))
    assert texts["Gap SGM % (1 % shift)"] == "-" and texts["Gap median / p95 / p99 %"] == "- / - / -"
