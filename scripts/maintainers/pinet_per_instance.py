"""Per-instance statistics of finished Pinet (or any) runs, in Pinet's own terms, for docs/pinet.md.

Pinet's figures are per-instance scatters of RS = (f - f*) / |f*| against CV = max(max |A y - x|, max (G y - h)^+);
the harness records means and worsts. This reloads each run's checkpoint (verified against its probe), predicts
its test inputs and prints the median, mean and extent of both, on the whole test split and, for runs on Pinet's
split, on DC3's 833 test rows it contains (rows 9167..9999 of X).

    PYTHONPATH=src python scripts/maintainers/pinet_per_instance.py results/pinet/records/dc3_qp/pinet/seed0 ...
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from hardlinear.evaluation.metrics import instance_metrics
from hardlinear.harness.checkpoint import load_run
from hardlinear.problems.datasets import build_dataset


def describe(name: str, values: np.ndarray) -> str:
    q = np.quantile(values, [0.0, 0.05, 0.5, 0.95, 1.0])
    return f"{name}: mean {values.mean():.3g}, median {q[2]:.3g}, 5-95% [{q[1]:.3g}, {q[3]:.3g}], min {q[0]:.3g}, max {q[4]:.3g}"


def main(run_dirs: list[str]) -> None:
    for run_dir in run_dirs:
        method = load_run(run_dir)
        problem, config = method.problem, method.run_config
        test = build_dataset(problem, "test", 1, 0, config["data"].get("solver"), config.get("cache_dir"), progress=False)
        with torch.no_grad():
            y = method.predict(test.xi.to(method.layer_dtype if hasattr(method, "layer_dtype") else torch.float64)).y
        m = instance_metrics(problem, test.xi, y, test.objective)
        rs = m["gap"] / 100.0
        cv = np.maximum(m["eq_max"], m["ineq_max"])
        print(f"== {run_dir} ({problem.name}, {len(rs)} test inputs)")
        print("  " + describe("RS", rs))
        print("  " + describe("CV", cv))
        print(f"  share of CV < 1e-3: {np.mean(cv < 1e-3):.3f}; ineq max excess {m['ineq_max'].max():.3g}; eq max {m['eq_max'].max():.3g}")
        if getattr(problem, "split", "dc3") == "pinet":
            X = problem.data.X
            dc3_test = problem.data.splits("dc3")["test"]
            rows = np.isin(np.arange(len(X))[-len(rs):], np.arange(len(X) - len(dc3_test), len(X)))
            print(f"  on DC3's {rows.sum()} test rows: " + describe("RS", rs[rows]) + "; " + describe("CV", cv[rows]))


if __name__ == "__main__":
    main(sys.argv[1:])
