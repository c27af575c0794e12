"""Run every paper experiment (resumable: configurations already in the results CSV are skipped).

    python scripts/run_paper.py                       # all tables, the paper's settings -> results/paper/runs.csv
    python scripts/run_paper.py --tables table_lp --extra hydra/launcher=joblib
"""

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ["table_qp_main", "table_lp", "table_qp_add", "table_pretrain", "penalty_dcopf", "penalty_portfolio"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", nargs="*", default=EXPERIMENTS, choices=EXPERIMENTS)
    parser.add_argument("--results", default="results/paper/runs.csv", help="results CSV (resumable: recorded runs are skipped)")
    parser.add_argument("--extra", nargs="*", default=[], help="extra Hydra overrides, e.g. trainer=fast")
    args = parser.parse_args()
    failed = []
    for i, name in enumerate(args.tables, 1):
        print(f"=== [{i}/{len(args.tables)}] experiment {name} ===", flush=True)
        code = subprocess.call([sys.executable, "run.py", f"+experiment={name}", f"results_csv={args.results}", *args.extra], cwd=ROOT)
        if code:
            failed.append(name)
    if failed:
        print(f"experiments with failures: {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
