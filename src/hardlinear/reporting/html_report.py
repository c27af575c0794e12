"""A study in the browser: one self-contained ``index.html`` with the study table, the figures and every run.

Why: W&B is offline by default and needs an account to sync; a newcomer had no other way to look at a study than
Markdown tables and a folder of PNGs. The page puts together what ``make tables`` and ``make figures`` derive from
the same results table (``study_table.build_study_table``, ``figures.study_figures``), so it says the same thing:

* the study table, one sortable table per problem (click a header, empty cells stay last; ``#sort=<table id>:<column>[:desc]`` in the
  address sorts on load), rows whose worst violation exceeds ``FEASIBILITY_TOL`` marked ``infeasible``;
* the figures as PNG data URIs with their captions, so the file opens anywhere, offline, with no folder beside it;
* every run: problem, method, seed, status and reason, its run directory, its W&B run (the run's URL where the
  W&B logs in its run directory name one, else the offline folder to ``wandb sync``) and its resolved config.

No network: no script, style sheet or font is fetched; the script that sorts is inline.
"""

from __future__ import annotations

import base64
import html
import math
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hardlinear.reporting.render import Table
from hardlinear.reporting.study_table import COLUMNS, build_study_table
from hardlinear.runtime.names import printable
from hardlinear.runtime.safe_read import read_head, within

REPORT_FILE = "index.html"
FEASIBLE_COLUMN = COLUMNS.index("Feasible")
INFEASIBLE_CLASS = ' class="infeasible"'
STATUS_COLUMN = COLUMNS.index("Status")
RUN_COLUMNS = ("Problem", "Method", "Seed", "Status", "Reason", "Run directory", "W&B", "Config")
FOLD_CHARS = 60
"""A status or reason longer than this is folded (``<details>``: the status, or the reason's start, and the full
text on a click): HardNet-Aff's not-applicable reason made one row a 340 px block at 1,400 px."""
WANDB_URL = re.compile(r"https://([A-Za-z0-9.-]+(?::[0-9]+)?)/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/runs/[A-Za-z0-9]+(?![^\s\"'<>])")
"""W&B's run URL form: ``https://<host>/<entity>/<project>/runs/<id>``; the host must be W&B's (:data:`WANDB_HOSTS`) or
the server the run's W&B settings name (``base_url``), else the line is not a link (a log line is data)."""
WANDB_HOSTS = ("wandb.ai",)
WANDB_BASE_URL = re.compile(r"base_url['\"]?\s*[:=]\s*['\"]?https://([A-Za-z0-9.-]+(?::[0-9]+)?)")
WANDB_LOG_BYTES = 4 * 2**20
"""How much of each W&B log is searched for the run's URL (it is printed near the start)."""

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 1400px; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; cursor: pointer; user-select: none; }
.scroll { overflow-x: auto; max-width: 100%; }  /* a table wider than the page scrolls in its box: every column reachable */
table.study td:first-child { min-width: 10em; max-width: 24em; overflow-wrap: anywhere; }
table.study td:nth-child(n+2):nth-child(-n+10) { white-space: nowrap; }  /* a number never breaks at its exponent */
table.runs td { overflow-wrap: anywhere; } table.runs td:nth-child(6) { min-width: 14em; } table.runs td:nth-child(4) { overflow-wrap: normal; }
td details summary { cursor: pointer; } td details[open] { max-width: 40em; }
th[aria-sort="ascending"]::after { content: " \\25B2"; } th[aria-sort="descending"]::after { content: " \\25BC"; }
tr.infeasible td { background: #fde2e2; } tr.infeasible td:first-child::before { content: "INFEASIBLE "; color: #b00; font-weight: bold; font-size: 0.8em; }
figure { margin: 1em 0 2em; } figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption, .caption, .notes { color: #444; } pre { margin: 0; font-size: 12px; } .status-failed, .status-diverged { color: #b00; }
"""

SCRIPT = """
function cellKey(td) {
  const t = td.textContent.trim();
  return /^[-+]?(\\d|\\.\\d)/.test(t) ? parseFloat(t) : t.toLowerCase();
}
function sortTable(table, col, desc) {
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  rows.sort((a, b) => {
    const x = cellKey(a.cells[col]), y = cellKey(b.cells[col]);
    if ((x === "-" || x === "") !== (y === "-" || y === "")) return (x === "-" || x === "") ? 1 : -1;  // empty cells last
    let c = (typeof x === "number" && typeof y === "number") ? x - y
      : (typeof x === "number") ? -1 : (typeof y === "number") ? 1 : (x < y ? -1 : x > y ? 1 : 0);
    return desc ? -c : c;
  });
  rows.forEach(r => body.appendChild(r));
  table.querySelectorAll("thead th").forEach((th, i) =>
    th.setAttribute("aria-sort", i === col ? (desc ? "descending" : "ascending") : "none"));
}
document.querySelectorAll("table.sortable").forEach(table => {
  table.querySelectorAll("thead th").forEach((th, i) => th.addEventListener("click", () => {
    const desc = th.getAttribute("aria-sort") === "ascending";
    sortTable(table, i, desc);
    history.replaceState(null, "", "#sort=" + table.id + ":" + i + (desc ? ":desc" : ""));
  }));
});
const wanted = /^#sort=([\\w-]+):(\\d+)(:desc)?$/.exec(decodeURIComponent(location.hash));
if (wanted && document.getElementById(wanted[1])) sortTable(document.getElementById(wanted[1]), +wanted[2], !!wanted[3]);
"""


def _e(value: Any) -> str:
    return html.escape(printable(value, newlines=True), quote=True)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value == ""


# --- the study table ---------------------------------------------------------------------------------------------
def table_html(table: Table) -> str:
    """The study table's blocks as sortable HTML tables (ids ``study-0``, ``study-1``, ...), infeasible rows marked."""
    parts = [f'<p class="caption">{_e(table.caption)}</p>']
    head = "".join(f"<th>{_e(c)}</th>" for c in table.columns)
    for i, block in enumerate(table.blocks):
        sizes = ", ".join(f"{k}={v}" for k, v in block.sizes.items())
        parts.append(f"<h3>{_e(block.title)}</h3>" + (f"<p>{_e(sizes)}</p>" if sizes else ""))
        rows = []
        for row in block.rows:
            infeasible = len(row) > FEASIBLE_COLUMN and row[FEASIBLE_COLUMN].text == "NO"
            cells = "".join(f"<td>{_status(c.text) if j == STATUS_COLUMN else '<b>' + _e(c.text) + '</b>' if c.bold else _e(c.text)}</td>"
                            for j, c in enumerate(row))
            rows.append(f"<tr{INFEASIBLE_CLASS if infeasible else ''}>{cells}</tr>")
        parts.append(f'<div class="scroll"><table class="sortable study" id="study-{i}"><thead><tr>{head}</tr></thead>'
                     f'<tbody>{"".join(rows)}</tbody></table></div>')
        if block.notes:
            parts.append('<ul class="notes">' + "".join(f"<li>{_e(n)}</li>" for n in block.notes) + "</ul>")
    parts.append('<ul class="notes">' + "".join(f"<li>{_e(n)}</li>" for n in table.notes) + "</ul>")
    return "\n".join(parts)


def _status(text: str) -> str:
    """A Status cell: as it is when short; ``not applicable: <long reason>`` folded to its status, the reason inside."""
    status, sep, reason = text.partition(": ")
    if len(text) <= FOLD_CHARS or not sep:
        return _e(text)
    return f"<details><summary>{_e(status)}:</summary> {_e(reason)}</details>"  # the text reads "status: reason" still


def _path_cell(path: str) -> str:
    """A Run directory cell: as it is when short, else its last two parts with the whole path folded under them (a
    temporary or cluster path made a row of the runs table five lines tall)."""
    if len(path) <= FOLD_CHARS:
        return _e(path)
    tail = "/".join(Path(path).parts[-2:])
    return f"<details><summary>…/{_e(tail)}</summary> {_e(path)}</details>"


def _reason(text: str) -> str:
    """A Reason cell of the runs: as it is when short, else its start with the full text folded under it."""
    if len(text) <= FOLD_CHARS:
        return _e(text)
    return f"<details><summary>{_e(text[:FOLD_CHARS].rstrip())}…</summary> {_e(text)}</details>"


# --- figures -----------------------------------------------------------------------------------------------------
def figures_html(df, study: str, work_dir: str | os.PathLike | None = None) -> str:
    """The study's figures (``figures.study_figures``, PNG) embedded as data URIs, each with its caption; a line
    saying why when there is nothing to draw. ``work_dir``: where the PNGs are drawn (a temporary folder inside it,
    removed when done or interrupted; the report's output folder, so nothing is left in the system's /tmp)."""
    from hardlinear.reporting.figures import runs_frame, study_figures

    runs = runs_frame(df)
    runs = runs[runs["study"] == study]
    if not len(runs):
        return "<p>No figures: the study has no run with status ok to draw.</p>"
    others = df[(df["study"] == study) & ~df["status"].isin(["ok", ""])]
    with tempfile.TemporaryDirectory(prefix=".figures-partial-", dir=work_dir) as tmp:
        try:
            paths, lines = study_figures(runs, tmp, study, ("png",), others=others)
        except ValueError as err:  # MixedSettings: a cell mixing settings (the table names them too)
            return f"<p>No figures: {_e(err)}</p>"
        captions, notes = {}, []
        for line in lines:
            found = re.match(r"- `([^`]+)`: (.*)", line)
            if found:
                captions[found.group(1)] = found.group(2)
            else:
                notes.append(line.removeprefix("- "))
        parts = []
        for path in sorted(paths, key=lambda p: p.name):
            data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
            parts.append(f'<figure id="fig-{_e(path.stem)}"><img alt="{_e(path.stem)}" src="data:image/png;base64,{data}">'
                         f"<figcaption><b>{_e(path.stem)}</b>: {_e(captions.get(path.stem, ''))}</figcaption></figure>")
    if notes:
        parts.append('<ul class="notes">' + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    return "\n".join(parts)


# --- runs --------------------------------------------------------------------------------------------------------
def wandb_link(run_dir: str | os.PathLike) -> tuple[str, str | None]:
    """``(text, href)`` of a run's W&B run from its run directory: the run's URL where W&B's logs there name one,
    the offline folder (to ``wandb sync``) otherwise; ``("", None)`` for a run not logged to W&B."""
    base = Path(run_dir) / "wandb"
    folders = sorted(p for p in base.glob("*run-*") if p.is_dir() and within(p, run_dir)) if base.is_dir() else []
    if not folders:
        return "", None
    folder = folders[-1]
    texts = []
    for log in sorted(folder.glob("logs/*.log")) + sorted(folder.glob("files/output.log")):
        try:  # a FIFO, /dev/zero through a link, a link out of the run directory: not read
            texts.append(read_head(log, WANDB_LOG_BYTES, folder=run_dir).decode("utf-8", "replace"))
        except OSError:
            continue
    hosts = set(WANDB_HOSTS) | {h for t in texts for h in WANDB_BASE_URL.findall(t) if not h.startswith("api.")}
    if os.environ.get("WANDB_BASE_URL"):
        hosts.add(re.sub(r"^https?://", "", os.environ["WANDB_BASE_URL"]).split("/")[0])
    for text in texts:
        for found in WANDB_URL.finditer(text):
            if found.group(1) in hosts:
                return found.group(0), found.group(0)
    if folder.name.startswith("offline-run-"):
        return f"offline: wandb sync {folder}", folder.resolve().as_uri()
    return f"W&B run {folder.name.rsplit('-', 1)[-1]} (no URL in its logs here)", folder.resolve().as_uri()


def run_config(row: Mapping[str, Any]) -> str:
    """A run's resolved config as ``key: value`` lines, from the results table's ``cfg.`` columns."""
    from hardlinear.harness.results import CONFIG_PREFIX

    return "\n".join(f"{k[len(CONFIG_PREFIX):]}: {v}" for k, v in sorted(row.items())
                     if k.startswith(CONFIG_PREFIX) and not _missing(v))


def runs_html(df) -> str:
    """Every run of the study, sorted by problem, method and seed: status, reason, run directory, W&B, config."""
    rows = []
    records = df.to_dict("records")
    records.sort(key=lambda r: (str(r.get("problem", "")), str(r.get("method", "")), str(r.get("variant", "")),
                                int(r["seed"]) if not _missing(r.get("seed")) else -1))
    for row in records:
        run_dir = "" if _missing(row.get("run_dir")) else str(row["run_dir"])
        if not _missing(row.get("record")) and str(row["record"]).endswith(".json"):
            run_dir = str(Path(str(row["record"])).parent)
        text, href = wandb_link(run_dir) if run_dir else ("", None)
        link = f'<a href="{_e(href)}">{_e(text)}</a>' if href else _e(text)
        if len(text) > FOLD_CHARS:  # an offline run's `wandb sync <path>`: the command whole, under its start
            link = f"<details><summary>{_e(text.split(' /')[0])} …</summary> {link}</details>"
        status = "" if _missing(row.get("status")) else str(row["status"]) or "ok"
        config = run_config(row)
        method = str(row.get("method", "")) + (f" {row['variant']}" if not _missing(row.get("variant")) else "")
        cells = [row.get("problem", ""), method, "" if _missing(row.get("seed")) else int(row["seed"])]
        rows.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells)
                    + f'<td class="status-{_e(status)}">{_e(status)}</td>'
                    + f"<td>{_reason('' if _missing(row.get('reason')) else str(row['reason']))}</td><td>{_path_cell(run_dir)}</td><td>{link}</td>"
                    + (f"<td><details><summary>config</summary><pre>{_e(config)}</pre></details></td>" if config else "<td>not recorded</td>")
                    + "</tr>")
    head = "".join(f"<th>{_e(c)}</th>" for c in RUN_COLUMNS)
    return f'<div class="scroll"><table class="sortable runs" id="runs"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


# --- the page ----------------------------------------------------------------------------------------------------
def study_report(df, study: str, defaults: Mapping[str, Any] | None = None,
                 work_dir: str | os.PathLike | None = None) -> str:
    """The HTML page of one study; ``df``: the results table (every status), restricted here to ``study``;
    ``work_dir``: where its figures are drawn (:func:`figures_html`)."""
    df = df[df["study"] == study]
    if not len(df):
        raise LookupError(f"no runs of study {study!r} to report")
    table, _ = build_study_table(df, study, defaults)
    return (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>Study {_e(study)}</title>'
        f"<style>{STYLE}</style></head><body>\n<h1>Study {_e(study)}</h1>\n"
        '<p><a href="#table">Table</a> · <a href="#figures">Figures</a> · <a href="#runs-section">Runs</a></p>\n'
        f'<section id="table"><h2>Table</h2>\n{table_html(table)}</section>\n'
        f'<section id="figures"><h2>Figures</h2>\n{figures_html(df, study, work_dir)}</section>\n'
        f'<section id="runs-section"><h2>Runs ({len(df)})</h2>\n{runs_html(df)}</section>\n'
        f"<script>{SCRIPT}</script>\n</body></html>\n"
    )


def write_report(df, out_dir: str | os.PathLike, study: str, defaults: Mapping[str, Any] | None = None) -> Path:
    """Write ``out_dir/index.html`` of one study (atomically); returns its path."""
    from hardlinear.runtime.atomic import atomic_write_bytes

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return atomic_write_bytes(out_dir / REPORT_FILE, study_report(df, study, defaults, work_dir=out_dir).encode())
