"""The paper's tables from the results table, with the paper's figures in adjacent columns: ``make_tables``.

Pure functions of the derived results table (``hardlinear.harness.results.load_records``: the records under the
roots given, and the legacy ``results/paper/runs.csv`` with its ``.skipped.csv`` and ``superseded.csv``):
nothing is rerun, and the same records give byte-identical Markdown and LaTeX. One call renders one
selection (a study, a filter on config keys). The pieces, each in its own module:

* ``labels``: what a row is (``RowKey``) and how rows and problems are named;
* ``stats``: the runs of a row (one per seed, one setting, else ``MixedSettings``), their means, number formats;
* ``paper_tables``: the paper's layout (``TABLES``, ``build_table``, ``build_penalty_table``) and how runs
  become its rows;
* ``render``: the intermediate ``Table`` and its Markdown and LaTeX.

The names other code used to import from here are re-exported.
"""

from __future__ import annotations

from pathlib import Path

from hardlinear.reporting.labels import RowKey, method_label, method_order, problem_title
from hardlinear.reporting.paper_tables import (
    MAIN_METRICS,
    PAPER_LABELS,
    PENALTY_EXPERIMENT,
    TABLE_NAMES,
    TABLES,
    build_penalty_table,
    build_table,
)
from hardlinear.reporting.render import render_latex, render_markdown, tex_escape
from hardlinear.reporting.stats import (
    MixedSettings,
    fmt,
    fmt_pair,
    fmt_sci,
    fmt_time,
    of_key,
    one_per_seed,
    seed_gaps_disagree,
    summarize,
    with_keys,
)

__all__ = [
    "MAIN_METRICS", "PAPER_LABELS", "PENALTY_EXPERIMENT", "TABLES", "TABLE_NAMES", "MixedSettings", "RowKey",
    "fmt", "fmt_pair", "fmt_sci", "fmt_time", "make_tables", "method_label", "method_order", "of_key",
    "one_per_seed", "problem_title", "seed_gaps_disagree", "summarize", "tex_escape", "with_keys",
]


NO_RESULT_STATUSES = ("skipped", "failed", "not_applicable", "superseded", "interrupted")
"""Statuses of runs without metrics: their reasons fill rows that have no run ("not run: ...")."""


def make_tables(
    results, out_dir: str | Path, study: str | None = None, where: dict | None = None,
) -> dict[str, Path]:
    """Write the tables the study has runs for as ``<out_dir>/<table>.md`` and ``.tex``; returns ``{"<table>.md": path, ...}``.

    ``results``: the results roots (directories of records and/or legacy results CSVs; see
    ``hardlinear.harness.results.load_records``) or an already loaded table. ``study`` and ``where`` select the runs;
    a cell whose runs differ in a setting other than the seed raises ``MixedSettings`` naming the keys.
    A table none of whose problems the study ran (a DC3-benchmark study has none of the paper's) is not written,
    and an older rendering of it in ``out_dir`` is removed, so the folder never shows a table of "not run" rows
    as if it were the study's.
    """
    from hardlinear.harness.results import report_table

    df = report_table(results, study=study, where=where)
    ran = set(df["problem"].astype(str)) if "problem" in df.columns else set()
    penalty_ran = "experiment" in df.columns and bool((df["experiment"].astype(str) == PENALTY_EXPERIMENT).any())
    skipped = df[df["status"].isin(NO_RESULT_STATUSES)]
    df = df[~df["status"].isin(NO_RESULT_STATUSES)]
    out_dir = Path(out_dir)
    tables = [build_table(spec, df, skipped) for spec in TABLES.values() if ran & {b.problem for b in spec.blocks}]
    if penalty_ran:
        tables.append(build_penalty_table(df, skipped))
    kept = {table.name for table in tables}
    for name in set(TABLE_NAMES) - kept:
        for suffix in (".md", ".tex"):
            (out_dir / f"{name}{suffix}").unlink(missing_ok=True)
    if tables:
        out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for table in tables:
        for suffix, render in ((".md", render_markdown), (".tex", render_latex)):
            path = out_dir / f"{table.name}{suffix}"
            path.write_text(render(table))
            written[path.name] = path
    return written
