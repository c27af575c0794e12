"""Inference-time levers of a trained refined ``proposed`` run, measured on its own test set (issue 41).

    PYTHONPATH=src python scripts/maintainers/refine_levers.py RUN_DIR [RUN_DIR ...] --eval-steps 50 200 1000 --picks refined objective

Reloads each run (checkpoint checked against its probe), then for each number of Douglas-Rachford steps at
inference and each ``refine_pick`` reports the test gap (mean, worst), the worst violations (float64, relative, as
the harness reports them) and the batch-1 latency. Why a script and not a rerun: the refinement's inference steps
and the pick change nothing the network learned, so one training run measures them all. The blend keeps every
output feasible, so extra steps can only cost time, never feasibility: the violation columns check that.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch


def measure(run_dir: str, eval_steps: list[int], picks: list[str], test_size: int | None) -> list[dict]:
    from hardlinear.evaluation.metrics import instance_metrics, summarize
    from hardlinear.harness.checkpoint import load_run
    from hardlinear.problems.datasets import build_dataset

    method = load_run(run_dir)
    if getattr(method, "refiner", None) is None:
        raise SystemExit(f"error: {run_dir} is not a refined proposed run (method.refine is none)")
    config, problem = method.run_config, method.problem
    data_cfg = dict(config.get("data") or {})
    size = int(test_size or data_cfg.get("test_size", 100))
    test = build_dataset(problem, "test", size, int(data_cfg.get("test_seed", 12345)),
                         data_cfg.get("solver") or problem.default_solver(), None, progress=False)
    xi = test.xi.to(torch.float64)
    rows = []
    method.eval()
    for steps in eval_steps:
        method.refiner.eval_steps = int(steps)
        for pick in picks:
            method.refine_pick = pick
            with torch.no_grad():
                y = method.predict(xi).y
                start = time.perf_counter()
                for i in range(20):
                    method.predict(xi[i : i + 1])
                ms = 1000 * (time.perf_counter() - start) / 20
            summary = summarize(instance_metrics(problem, test.xi, y, test.objective), "test")
            rows.append({
                "run": run_dir, "problem": problem.name, "eval_steps": steps, "pick": pick,
                "gap_mean": summary["test/gap_mean"], "gap_worst": summary["test/gap_worst"],
                "ineq_worst": summary["test/ineq_viol_worst"], "eq_worst": summary["test/eq_viol_worst"],
                "batch1_ms": ms,
            })
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dirs", nargs="+")
    parser.add_argument("--eval-steps", type=int, nargs="+", default=[50, 200, 1000])
    parser.add_argument("--picks", nargs="+", default=["refined", "objective"], choices=["refined", "objective"])
    parser.add_argument("--test-size", type=int, default=None, help="default: the run's")
    args = parser.parse_args(argv)
    if any(s < 1 for s in args.eval_steps):
        parser.error("--eval-steps must be >= 1")
    torch.set_num_threads(1)
    for run_dir in args.run_dirs:
        measure(run_dir, args.eval_steps, args.picks, args.test_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
