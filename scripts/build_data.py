"""Build (or verify) the cached validation and test sets of the paper's problems, with build times."""

import argparse
import time

import torch

from hardlinear.problems import PAPER_SIZES, build_problem
from hardlinear.problems.datasets import build_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--problems", nargs="*", default=list(PAPER_SIZES))
    parser.add_argument("--objectives", nargs="*", default=["lp", "qp"])
    parser.add_argument("--cache-dir", default="data/cache")
    parser.add_argument("--val-size", type=int, default=100)
    parser.add_argument("--test-size", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--test-seed", type=int, default=12345)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"{'problem':<11} {'obj':<4} {'split':<5} {'solver':<9} {'build s':>8} {'ms/solve':>9} cached")
    for name in args.problems:
        for objective in args.objectives:
            p = build_problem(name, objective=objective)
            for split, size, seed in (("val", args.val_size, args.seed), ("test", args.test_size, args.test_seed)):
                t0 = time.perf_counter()
                d = build_dataset(p, split, size, seed, cache_dir=args.cache_dir)
                wall = time.perf_counter() - t0
                print(f"{name:<11} {objective:<4} {split:<5} {d.solver:<9} {wall:8.2f} {1000 * d.solve_time_s.mean():9.2f} {d.from_cache}")


if __name__ == "__main__":
    main()
