"""Issue 44 item 4: a study in the browser. A real sweep (three methods on a small QP of one's own, one not
applicable, logged to W&B offline) -> ``scripts/make_report.py`` -> ``index.html``: the table with the infeasible
row marked, the figures embedded, every run with status, reason, config and W&B run; then headless Chromium opens
it (skipped where none is installed) and the images decode, the table sorts and nothing is fetched."""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_own_study import SMALL, arrays

from hardlinear.reporting.study_table import COLUMNS

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


def _sh(args: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})})
    assert done.returncode == 0, f"{args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("report")
    np.savez(tmp / "mine.npz", **arrays())
    wandb = {"WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    for var in ("WANDB_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR"):
        (tmp / var).mkdir()
        wandb[var] = str(tmp / var)
    logger = ["logger=wandb"] if _has_wandb() else []
    _sh([sys.executable, "run.py", "-m", "problem=linear", f"problem.path={tmp / 'mine.npz'}", *SMALL, *logger,
         f"results_dir={tmp / 'res'}", f"cache_dir={tmp / 'cache'}", "study=mine", "method=proposed,penalty,hardnet_aff"],
        env=wandb)
    done = _sh([sys.executable, "scripts/make_report.py", "--results", str(tmp / "res"), "--study", "mine", "--out", str(tmp / "reports")])
    page = tmp / "reports" / "mine" / "index.html"
    assert f"study mine: {page}" in done.stdout
    return page


def _has_wandb() -> bool:
    import importlib.util

    return importlib.util.find_spec("wandb") is not None


def _rows(page: str, table_id: str) -> list[tuple[str, list[str]]]:
    """``(tr attributes, cell texts)`` of a table's body."""
    body = re.search(rf'<table[^>]*id="{table_id}".*?<tbody>(.*?)</tbody>', page, re.S).group(1)
    return [(attrs, [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)])
            for attrs, tr in re.findall(r"<tr([^>]*)>(.*?)</tr>", body, re.S)]


def test_the_page_holds_table_figures_and_runs(report):
    page = report.read_text()
    rows = {cells[0]: (attrs, cells) for attrs, cells in _rows(page, "study-0")}
    feasible = COLUMNS.index("Feasible")
    assert 'class="infeasible"' in rows["Penalty †"][0] and rows["Penalty †"][1][feasible] == "NO"
    assert "infeasible" not in rows["Proposed"][0] and rows["Proposed"][1][feasible] == "yes"
    sgm, tails = rows["Proposed"][1][COLUMNS.index("Gap SGM % (1 % shift)")], rows["Proposed"][1][COLUMNS.index("Gap median / p95 / p99 %")]
    assert float(sgm) >= 0 and len([float(t) for t in tails.split(" / ")]) == 3  # the runs' statistics, shown
    assert "not applicable: HardNet-Aff needs" in rows["HardNet-Aff"][1][-1]  # labelled as the table labels peers
    images = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert any(name.endswith("_gap_time") for name, _ in images) and any(name.endswith("_training") for name, _ in images)
    assert all(base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n" for _, data in images)
    assert not re.search(r'(src|href)="(https?:)?//', page), "the page must fetch nothing"
    runs = {cells[1]: cells for _, cells in _rows(page, "runs")}
    assert sorted(runs) == ["hardnet_aff", "penalty", "proposed"]
    assert runs["hardnet_aff"][3] == "not_applicable" and runs["hardnet_aff"][4].startswith("HardNet-Aff needs")
    assert runs["proposed"][3] == "ok" and "trainer.name: fast" in runs["proposed"][7] and "study: mine" in runs["proposed"][7]
    assert Path(runs["proposed"][5], "record.json").exists()
    if _has_wandb():
        assert runs["proposed"][6].startswith("offline: wandb sync ") and Path(runs["proposed"][6].split()[-1]).is_dir()


def _chromium(url: str, tmp: Path, *flags: str) -> str:
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--no-first-run", f"--user-data-dir={tmp / 'profile'}", "--virtual-time-budget=10000", *flags,
                           "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here (Debian: apt-get install chromium)")
def test_chromium_renders_the_images_and_sorts_the_table(report, tmp_path):
    # the images decode: a page beside the report reads them through an iframe (file access allowed for the probe)
    probe = report.parent.parent / "probe.html"
    probe.write_text(
        '<!doctype html><pre id="out">waiting</pre><iframe id="f" src="mine/index.html"></iframe><script>'
        'document.getElementById("f").addEventListener("load", () => { const d = document.getElementById("f").contentDocument;'
        ' const imgs = Array.from(d.querySelectorAll("figure img"));'
        ' document.getElementById("out").textContent = JSON.stringify({images: imgs.length,'
        ' decoded: imgs.filter(i => i.complete && i.naturalWidth > 100).length, tables: d.querySelectorAll("table.study").length,'
        ' infeasible: d.querySelectorAll("tr.infeasible").length}); });</script>')
    dom = _chromium(probe.as_uri(), tmp_path, "--allow-file-access-from-files")
    seen = json.loads(html.unescape(re.search(r'<pre id="out">([^<]*)</pre>', dom).group(1)))
    assert seen["images"] >= 3 and seen["decoded"] == seen["images"]
    assert seen == {**seen, "tables": 1, "infeasible": 1}
    # the table sorts (the address asks for the gap column, descending): rows come back in that order
    dom = _chromium(report.as_uri() + "#sort=study-0:2:desc", tmp_path)
    cells = [c[2] for _, c in _rows(dom, "study-0")]
    assert cells[-1] == "-"  # the not-applicable row: empty cells stay last
    gaps = [float(c.split()[0]) for c in cells[:-1]]
    assert len(gaps) == 2 and gaps == sorted(gaps, reverse=True)
    assert re.search(r'<th aria-sort="descending">Gap % \(mean ± sd\)</th>', dom)
    ascending = [c[2] for _, c in _rows(_chromium(report.as_uri() + "#sort=study-0:2", tmp_path), "study-0")]
    assert [float(c.split()[0]) for c in ascending[:-1]] == gaps[::-1] and ascending[-1] == "-"
