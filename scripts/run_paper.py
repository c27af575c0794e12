"""Run every paper experiment as the study ``paper`` (resumable: runs already recorded in it are skipped).

    python scripts/run_paper.py                       # all tables, the paper's settings -> results/paper/runs/
    python scripts/run_paper.py --tables table_lp --extra hydra/launcher=joblib
    python scripts/run_paper.py --seeds 0        # one seed of every table first, then --seeds 1, --seeds 2
"""

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ["table_qp_main", "table_lp", "table_qp_add", "table_pretrain", "penalty_dcopf", "penalty_portfolio", "table_large"]


def has_seed_axis(experiment: str) -> bool:
    """Whether the experiment sweeps seeds (the tables: 0,1,2); the penalty selections run one seed only."""
    from omegaconf import OmegaConf

    params = OmegaConf.load(ROOT / "conf" / "experiment" / f"{experiment}.yaml").hydra.sweeper.params
    return "," in str(params.get("seed", ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", nargs="*", default=EXPERIMENTS, choices=EXPERIMENTS)
    parser.add_argument("--study", default="paper", help="the study the runs belong to (resumable: its recorded runs are skipped)")
    parser.add_argument("--runs", default="results/paper/runs", help="where the sweeps' run directories (and records) go")
    parser.add_argument("--extra", nargs="*", default=[], help="extra Hydra overrides, e.g. trainer=fast")
    parser.add_argument(
        "--seeds",
        default=None,
        help="comma-separated seeds replacing each table's seed axis (e.g. 0, or 1,2): complete tables one seed at a time",
    )
    args = parser.parse_args()
    if args.seeds is not None:
        seeds = [s.strip() for s in args.seeds.split(",")]
        if not seeds or not all(s.isdigit() for s in seeds):
            parser.error(f"--seeds takes comma-separated non-negative integers; got {args.seeds!r}")
        args.seeds = ",".join(seeds)
    failed = []
    for i, name in enumerate(args.tables, 1):
        print(f"=== [{i}/{len(args.tables)}] experiment {name} ===", flush=True)
        sweep_dir = f"{args.runs}/{name}-{time.strftime('%Y%m%d-%H%M%S')}"
        overrides = [f"+experiment={name}", f"study={args.study}", f"hydra.sweep.dir={sweep_dir}", *args.extra]
        if args.seeds is not None and has_seed_axis(name):
            overrides.append(f"seed={args.seeds}")
        code = subprocess.call([sys.executable, "run.py", *overrides], cwd=ROOT)
        if code:
            failed.append(name)
    if failed:
        print(f"experiments with failures: {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
