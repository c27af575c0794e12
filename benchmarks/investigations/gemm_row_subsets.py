"""Are the rows of a matrix product the same bits when only some rows are multiplied? (issue 31, item 5)

Why it matters: the largest share of the paper study's time is APM's unrolled training iterations, where a batch
keeps iterating until its slowest row converges. Multiplying only the rows still moving (compaction) would do
less work, but it changes the result unless BLAS returns, for a subset of rows, exactly the bits it returns for
those rows inside the full product. This script checks that for the products APM's loop does (``u N_S'`` and
``d N_S`` at the paper problems' shapes) with the installed torch and its BLAS, one thread.

    python benchmarks/investigations/gemm_row_subsets.py
"""

from __future__ import annotations

import torch

# (batch, slack rows, null-space dimension): dcopf_118 and dcopf_200 in the standard form, DC3's QP, a large batch
SHAPES = [(64, 768, 18), (64, 1044, 31), (64, 50, 50), (1024, 768, 18)]
SUBSETS = (1, 2, 3, 7, 13, 31, 63)


def main() -> None:
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    blas = [ln.strip(" -") for ln in torch.__config__.show().splitlines() if "BLAS_INFO" in ln or "Math Kernel" in ln]
    print(f"torch {torch.__version__}; " + "; ".join(blas)[:160])
    for dtype in (torch.float32, torch.float64):
        for batch, rows, dim in SHAPES:
            u = torch.randn(batch, dim, dtype=dtype, generator=gen)
            n_s = torch.randn(rows, dim, dtype=dtype, generator=gen)
            c = torch.randn(batch, rows, dtype=dtype, generator=gen)
            d = torch.randn(batch, rows, dtype=dtype, generator=gen)
            full_deficit, full_step = torch.addmm(c, u, n_s.T), d @ n_s
            differ, worst = 0, 0.0
            for k in SUBSETS:
                idx = torch.randperm(batch, generator=gen)[:k].sort().values
                for part, full in ((torch.addmm(c[idx], u[idx], n_s.T), full_deficit[idx]), (d[idx] @ n_s, full_step[idx])):
                    if not torch.equal(part, full):
                        differ += 1
                        worst = max(worst, float(((part - full).abs() / full.abs().clamp(min=1e-300)).max()))
            print(f"{str(dtype):14s} batch {batch:5d} x {rows:5d} x {dim:3d}: {differ:2d} of {2 * len(SUBSETS)} subset products "
                  f"differ from the full product's rows (worst relative difference {worst:.1e})")


if __name__ == "__main__":
    main()
