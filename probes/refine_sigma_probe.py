"""How fast the ``refine=dr`` steps approach C(x) on dc3_qp, per step size (docs/peer_methods.md, issue 28).

Projects N(0, 4) outputs of 256 test inputs with ``DouglasRachford(family, K, sigma)`` and prints the worst and
mean inequality violation and the mean distance moved, for a grid of ``sigma`` and ``K``.

    PYTHONPATH=src python probes/refine_sigma_probe.py
"""

from __future__ import annotations

import time

import torch

from hardlinear.layers.refine import DouglasRachford
from hardlinear.problems import build_problem


def main() -> None:
    torch.set_num_threads(1)
    problem = build_problem("dc3_qp")
    family = problem.family
    xi = torch.as_tensor(problem.given_inputs["test"][:256], dtype=torch.float64)
    y = 2 * torch.randn(256, family.n, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for sigma in (0.1, 0.3, 1.0, 3.0):
        for steps in (5, 10, 20, 50, 200):
            refine = DouglasRachford(family, steps, sigma=sigma).train()
            t0 = time.perf_counter()
            out = refine(xi, y)
            ms = 1e3 * (time.perf_counter() - t0)
            viol = family.ineq_resid(xi, out).clamp_min(0).amax(dim=1)
            moved = float((out - y).norm(dim=1).mean())
            print(f"sigma={sigma} steps={steps}: worst ineq {float(viol.max()):.2e}, mean {float(viol.mean()):.2e}, "
                  f"distance {moved:.4f}, {ms:.1f} ms")


if __name__ == "__main__":
    main()
