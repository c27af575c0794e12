"""Tables and figures: pure functions of the results CSV (never rerun anything).

``make_tables(results_csv, out_dir)`` writes the paper's five tables (Markdown and LaTeX) with the paper's
figures beside ours; ``make_figures(results_csv, out_dir)`` writes the gap-time and violation figures.
"""

from hardlinear.reporting.figures import make_figures
from hardlinear.reporting.tables import TABLE_NAMES, make_tables

__all__ = ["TABLE_NAMES", "make_figures", "make_tables"]
