"""Move result rows made obsolete by a change of method or defaults out of a results CSV, keeping them.

    python scripts/maintainers/supersede.py --methods apm eapm --reason "APM/EAPM trained through the correction (train_iter=300)"

The rows go to ``<results dir>/superseded.csv`` with the reason in a ``superseded_reason`` column, so the
tables (which read the results CSV) stop using them and the record of what was run stays in the repository.
A resumable sweep then reruns those configurations (their config hash is no longer recorded).

For the legacy CSV store only (``results/paper/runs.csv``, read-only since records): records are never moved or
edited; a change that alters results bumps ``hardlinear.harness.results.RESULTS_VERSION`` instead, which makes resume
rerun every configuration, and the tables use the newest run of each seed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
from filelock import FileLock


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default="results/paper/runs.csv")
    parser.add_argument("--methods", nargs="+", required=True, help="method names to move (the CSV's method column)")
    parser.add_argument("--problems", nargs="*", default=None, help="only these problems (default: all)")
    parser.add_argument("--before", default=None, help="only rows with a timestamp before this ISO time")
    parser.add_argument("--reason", required=True)
    args = parser.parse_args()
    path = Path(args.results)
    out = path.parent / "superseded.csv"
    with FileLock(str(path) + ".lock"):  # the lock the results store appends under
        runs = pd.read_csv(path, dtype=str, keep_default_na=False)
        pick = runs["method"].isin(args.methods)
        if args.problems:
            pick &= runs["problem"].isin(args.problems)
        if args.before:
            pick &= runs["timestamp"] < args.before
        moved = runs[pick].assign(superseded_reason=args.reason)
        if moved.empty:
            print("no rows matched; nothing moved")
            return 0
        old = pd.read_csv(out, dtype=str, keep_default_na=False) if out.exists() else None
        merged = moved if old is None else pd.concat([old, moved], ignore_index=True).fillna("")
        merged.to_csv(out, index=False)
        runs[~pick].to_csv(path, index=False)
    print(f"moved {len(moved)} rows of {sorted(set(moved['method']))} to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
