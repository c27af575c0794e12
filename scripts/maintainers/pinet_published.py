"""Extract Pinet's published DC3 runs (antonioterpin/pinet @ e662b15) into reporting/data/pinet_published.csv.

Why: issue 41 compares our reimplementation with the numbers Pinet's authors committed, so the figures are carried
as data with their source. The result files hold per-instance objectives and violations but only the *mean* optimum;
the per-instance optima come from the test dataset file committed beside them (same 833 DC3 test inputs, checked).

    python scripts/maintainers/pinet_published.py --git-dir <a clone of antonioterpin/pinet>/.git
"""

from __future__ import annotations

import argparse
import csv
import io
import subprocess
from pathlib import Path

import numpy as np

REPO = "antonioterpin/pinet"
COMMIT = "e662b15"
ROOT = "src/benchmarks/simple_QP"
OUT = Path(__file__).resolve().parents[2] / "src/hardlinear/reporting/data/pinet_published.csv"

# (folder, file, problem, backward, accuracy): the files that parse_results.py of the same commit names per table
RUNS = [
    ("convex_high", "results_20250312_181354", "dc3_qp", "implicit", "high"),
    ("convex_high", "results_20250312_181513", "dc3_qp", "fixed_point", "high"),
    ("convex_high", "results_20250312_181700", "dc3_qp", "unrolled", "high"),
    ("convex_low", "results_20250313_123433", "dc3_qp", "implicit", "low"),
    ("convex_low", "results_20250313_123532", "dc3_qp", "fixed_point", "low"),
    ("convex_low", "results_20250313_123749", "dc3_qp", "unrolled", "low"),
    ("nonconvex_high", "results_20250312_181818", "dc3_nonconvex", "implicit", "high"),
    ("nonconvex_high", "results_20250312_181937", "dc3_nonconvex", "fixed_point", "high"),
    ("nonconvex_high", "results_20250312_182124", "dc3_nonconvex", "unrolled", "high"),
    ("nonconvex_low", "results_20250313_123915", "dc3_nonconvex", "implicit", "low"),
    ("nonconvex_low", "results_20250313_124012", "dc3_nonconvex", "fixed_point", "low"),
    ("nonconvex_low", "results_20250313_124228", "dc3_nonconvex", "unrolled", "low"),
]
DATASET = {"dc3_qp": "simple", "dc3_nonconvex": "nonconvex"}
# DC3's own runs as Pinet stored them (the same blob sits in the _high and _low folders)
DC3_RUNS = [("convex_high", "dc3_simple.npz", "dc3_qp"), ("nonconvex_high", "dc3_nonconvex.npz", "dc3_nonconvex")]

COLUMNS = [
    "source_repo", "commit", "path", "problem", "method", "backward", "accuracy", "n_test", "epochs",
    "n_iter_train", "n_iter_test", "n_iter_bwd", "lr", "sigma", "omega", "objective_mean", "opt_objective_mean",
    "rs_gap_of_means_pct", "rs_mean_pct", "rs_worst_pct", "eq_max_abs_mean", "eq_max_abs_worst",
    "ineq_max_abs_mean", "ineq_max_abs_worst", "train_s", "inference_s", "optima_from",
]  # fmt: skip


def _npz(git_dir: str, path: str) -> dict[str, np.ndarray]:
    """One .npz of the commit, read from git (no work tree)."""
    blob = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{COMMIT}:{path}"], capture_output=True, check=True)
    with np.load(io.BytesIO(blob.stdout), allow_pickle=True) as data:
        return {k: data[k] for k in data.files}


def _optima(git_dir: str, problem: str) -> tuple[np.ndarray, np.ndarray, str]:
    """Per-instance optimal objectives of the test inputs, from the dataset committed beside the results."""
    path = f"{ROOT}/datasets/dc3_random_{DATASET[problem]}_dataset_var100_ineq50_eq50_ex10000test.npz"
    d = _npz(git_dir, path)
    y, q, p = d["Ystar"][:, :, 0], d["Q"][0], d["p"][0, :, 0]
    lin = np.sin(y) @ p if problem == "dc3_nonconvex" else y @ p
    return 0.5 * np.einsum("bi,ij,bj->b", y, q, y) + lin, d["X"][:, :, 0], path


def _pinet_row(git_dir: str, folder: str, stem: str, problem: str, backward: str, accuracy: str) -> dict:
    path = f"{ROOT}/results/{folder}/{stem}_dc3_random_{DATASET[problem]}_dataset_var100_ineq50_eq50_ex10000.npz"
    r = _npz(git_dir, path)
    opt, _, opt_path = _optima(git_dir, problem)
    f = r["obj_fun_test"][:, 0]
    if abs(opt.mean() - float(r["opt_obj_test"])) > 1e-9 * abs(opt.mean()):
        raise ValueError(f"{path}: mean optimum {float(r['opt_obj_test'])} differs from the dataset's {opt.mean()}")
    expect = {"implicit": (False, False), "fixed_point": (False, True), "unrolled": (True, True)}[backward]
    if (bool(r["unroll"]), bool(r["fpi"])) != expect:
        raise ValueError(f"{path}: unroll/fpi flags {bool(r['unroll'])}/{bool(r['fpi'])} are not {backward}'s")
    rs = 100 * (f - opt) / np.abs(opt)
    eq, ineq = r["eq_viol_test"][:, :, 0].max(axis=1), r["ineq_viol_test"][:, :, 0].max(axis=1)
    return {
        "path": path, "problem": problem, "method": "Pinet", "backward": backward, "accuracy": accuracy,
        "n_test": len(f), "epochs": int(r["n_epochs"]), "n_iter_train": int(r["n_iter_train"]),
        "n_iter_test": int(r["n_iter_test"]), "n_iter_bwd": int(r["n_iter_bwd"]), "lr": float(r["learning_rate"]),
        "sigma": float(r["sigma"]), "omega": float(r["omega"]), "objective_mean": f.mean(),
        "opt_objective_mean": opt.mean(), "rs_gap_of_means_pct": 100 * (f.mean() - opt.mean()) / abs(opt.mean()),
        "rs_mean_pct": rs.mean(), "rs_worst_pct": rs.max(), "eq_max_abs_mean": eq.mean(), "eq_max_abs_worst": eq.max(),
        "ineq_max_abs_mean": ineq.mean(), "ineq_max_abs_worst": ineq.max(), "train_s": float(r["training_time"]),
        "inference_s": float(r["inference_time"]), "optima_from": f"Ystar of {opt_path}",
    }  # fmt: skip


def _dc3_row(git_dir: str, folder: str, name: str, problem: str) -> dict:
    path = f"{ROOT}/results/{folder}/{name}"
    r = _npz(git_dir, path)
    opt, _, opt_path = _optima(git_dir, problem)
    f = float(r["mean_objective"])
    return {
        "path": path, "problem": problem, "method": "DC3 (Pinet's run)", "objective_mean": f,
        "opt_objective_mean": opt.mean(), "rs_gap_of_means_pct": 100 * (f - opt.mean()) / abs(opt.mean()),
        "eq_max_abs_mean": float(r["mean_equality_max"]), "eq_max_abs_worst": float(r["max_equality_max"]),
        "ineq_max_abs_mean": float(r["mean_inequality_max"]), "ineq_max_abs_worst": float(r["max_inequality_max"]),
        "train_s": float(r["train_time"]), "inference_s": float(r["inference_time"]),
        "optima_from": f"Ystar of {opt_path}",
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git-dir", required=True, help="a clone (bare is fine) of antonioterpin/pinet")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    rows = [_pinet_row(args.git_dir, *run) for run in RUNS] + [_dc3_row(args.git_dir, *run) for run in DC3_RUNS]
    with args.out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            row = {"source_repo": REPO, "commit": COMMIT, **row}
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
    print(f"wrote {len(rows)} rows to {args.out}")


if __name__ == "__main__":
    main()
