"""The table builders behind the results pages: the peer table marks the block docs/results_dcopf.md includes, and
the speed page's tables come from the committed benchmark outputs (scripts/maintainers/speed_table.py)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "maintainers"))
try:
    import peers_table  # scripts/maintainers/ is not a package
    import speed_table
finally:
    sys.path.pop(0)


def test_the_peer_table_marks_its_dcopf_and_portfolio_block():
    text = "# T\n\n### dc3_qp (x)\n\n|a|\n|---|\n\n### dcopf_14 (y)\n\n|b|\n|---|\n\n## DC3's nine QP datasets (z)\n\n|c|\n"
    marked = peers_table.mark_sections(text)
    body = marked.split("--8<-- [start:dcopf_portfolio]")[1].split("--8<-- [end:dcopf_portfolio]")[0]
    assert "### dcopf_14 (y)" in body and "dc3_qp" not in body and "nine" not in body
    assert marked.replace("<!-- --8<-- [start:dcopf_portfolio] -->\n\n", "").replace(
        "<!-- --8<-- [end:dcopf_portfolio] -->\n\n", "") == text  # nothing else moves


def test_the_peer_table_refuses_a_table_without_the_block():
    with pytest.raises(ValueError, match="dcopf_portfolio"):
        peers_table.mark_sections("# T\n\n### dc3_qp (x)\n\n|a|\n|---|\n")


def test_the_speed_tables_are_the_committed_ones():
    """What the builder writes from the committed benchmark outputs is the committed file (make artifacts)."""
    assert speed_table.build(ROOT) == (ROOT / "results" / "bench" / "speed.md").read_text()


def test_a_missing_benchmark_output_is_named(tmp_path):
    for rel in speed_table.SOURCES[1:]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    with pytest.raises(FileNotFoundError, match="methods_quiet/methods.json"):
        speed_table.build(tmp_path)
    assert speed_table.main(["--root", str(tmp_path), "--out", str(tmp_path / "speed.md")]) == 1
    assert not (tmp_path / "speed.md").exists()
