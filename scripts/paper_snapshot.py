"""Regenerate the committed reproduction (tables, figures, provenance) from a consistent snapshot of a results
CSV that a sweep is still appending to, and optionally stage it for a commit.

    python scripts/paper_snapshot.py                 # results/paper: make paper-tables under the store's lock
    python scripts/paper_snapshot.py --git-add       # ... and `git add results/paper` before the lock is released

Why: `make paper-tables` reads the CSV three times and `git add` reads it once more; a row appended in between
leaves committed tables that do not regenerate from the committed CSV byte for byte (tests/test_tables.py).
Holding the results store's own lock (`<csv>.lock`, the one every append takes) makes the four reads one
snapshot; a sweep's next append simply waits the half minute this takes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from filelock import FileLock

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default="results/paper", help="the reproduction folder (runs.csv, tables/, figures/)")
    parser.add_argument("--git-add", action="store_true", help="stage the folder while the lock is held")
    args = parser.parse_args()
    folder = (ROOT / args.dir).resolve()
    csv = folder / "runs.csv"
    if not csv.is_file():
        print(f"error: no results CSV at {csv}", file=sys.stderr)
        return 1
    steps = [
        ["scripts/make_tables.py", "--results", str(csv), "--out", str(folder / "tables")],
        ["scripts/make_figures.py", "--results", str(csv), "--out", str(folder / "figures")],
        ["scripts/provenance.py", "--results", str(csv), "--out", str(folder / "provenance.json")],
    ]
    with FileLock(str(csv) + ".lock"):
        for step in steps:
            code = subprocess.call([sys.executable, *step], cwd=ROOT, stdout=subprocess.DEVNULL)
            if code:
                print(f"error: {' '.join(step)} exited with {code}", file=sys.stderr)
                return code
        if args.git_add:
            subprocess.check_call(["git", "add", str(folder)], cwd=ROOT)
    print(f"regenerated {folder.relative_to(ROOT)} from one snapshot of {csv.name}" + (" and staged it" if args.git_add else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
