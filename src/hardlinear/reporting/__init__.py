"""Tables and figures: pure functions of the derived results table (never rerun anything).

``make_tables(results, out_dir, study=, where=)`` writes the paper's five tables (Markdown and LaTeX) with the
paper's figures beside ours; ``make_figures(results, out_dir, study=, where=)`` writes the gap-time and
violation figures. ``results``: results roots (directories of records, legacy CSVs) or a loaded table.
"""

from hardlinear.reporting.figures import make_figures
from hardlinear.reporting.paper_tables import TABLE_NAMES
from hardlinear.reporting.tables import make_tables

__all__ = ["TABLE_NAMES", "make_figures", "make_tables"]
