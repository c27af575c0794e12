"""Regenerate the committed reproduction (tables, figures, provenance) of the paper study, and optionally
stage it for a commit.

    python scripts/maintainers/paper_snapshot.py                 # results/paper/tables, figures, provenance.json
    python scripts/maintainers/paper_snapshot.py --git-add       # ... and `git add results/paper`

The paper study is the legacy ``results/paper/runs.csv`` (read-only since the record store; see
hardlinear.harness.results) plus every record of study ``paper`` under ``results/`` (scripts/run_paper.py writes them
under results/paper/runs/). Records are immutable, so no lock is needed for a consistent snapshot: a run that
finishes meanwhile adds a record, which the next snapshot includes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from hardlinear.reporting import make_figures, make_tables

ROOT = Path(__file__).resolve().parents[2]
STUDY = "paper"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default="results/paper", help="the reproduction folder (runs.csv, tables/, figures/)")
    parser.add_argument("--git-add", action="store_true", help="stage the folder afterwards")
    args = parser.parse_args()
    folder = (ROOT / args.dir).resolve()
    csv = folder / "runs.csv"
    if not csv.is_file():
        print(f"error: no results CSV at {csv}", file=sys.stderr)
        return 1
    roots = [csv, ROOT / "results"]
    make_tables(roots, folder / "tables", study=STUDY)
    make_figures(roots, folder / "figures", study=STUDY)
    code = subprocess.call([sys.executable, "scripts/maintainers/provenance.py", "--results", csv.relative_to(ROOT).as_posix(), "--out", str(folder / "provenance.json")],
                           cwd=ROOT, stdout=subprocess.DEVNULL)
    if code:
        print(f"error: scripts/maintainers/provenance.py exited with {code}", file=sys.stderr)
        return code
    if args.git_add:
        subprocess.check_call(["git", "add", str(folder)], cwd=ROOT)
    print(f"regenerated {folder.relative_to(ROOT)} (study {STUDY})" + (" and staged it" if args.git_add else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
