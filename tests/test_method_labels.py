"""Issue 44 item 8: one spelling per method in tables and figures (no "DC3" beside "fsnet"), and rows in a stated
order: the paper's methods, the peers, then other names alphabetically."""

from __future__ import annotations

from pathlib import Path

import yaml
from test_tables import _row

from hardlinear.harness import results
from hardlinear.reporting.labels import METHOD_LABELS, RowKey, method_label
from hardlinear.reporting.study_table import build_study_table

CONF = Path(__file__).resolve().parents[1] / "conf"


def test_every_shipped_method_has_a_label():
    names = {yaml.safe_load(p.read_text()).get("name") for p in (CONF / "method").glob("*.yaml")} - {None}
    assert names <= set(METHOD_LABELS), f"methods without a label: {sorted(names - set(METHOD_LABELS))}"
    assert [method_label(RowKey(m)) for m in ("fsnet", "hardnet_aff", "pinet")] == ["FSNet", "HardNet-Aff", "Pinet"]
    assert method_label(RowKey("my_method")) == "my_method"  # a user's own name passes through


def test_study_rows_follow_the_stated_order(tmp_path):
    for i, method in enumerate(("zeta", "fsnet", "proposed", "alpha", "dc3", "hardnet_aff")):
        row = _row("dcopf_118", "lp", method, 0, "")
        results.write_record(tmp_path / f"r{i}", {"identity": row["config_hash"], "study": "s", "status": "ok", "reason": "",
                                                  "row": row, "config": {"seed": 0, "method": {"name": method}}})
    table, _ = build_study_table(results.report_table([str(tmp_path)]), "s")
    labels = [row[0].text for row in table.blocks[0].rows]
    assert labels == ["Proposed", "DC3", "HardNet-Aff", "FSNet", "alpha", "zeta"]
    assert any(note.startswith("Rows: the paper's methods in the paper's order, then the peers") for note in table.notes)
