"""How hard is a problem's solution map for the proposed layer? Binding rows at the optimum, LP against QP.

A network learns the map from inputs to optimal solutions. An LP's optimum sits on a vertex and jumps
between vertices as the inputs move; a strongly convex QP's moves continuously, with fewer rows binding.
Every binding row is one that a slightly wrong prediction crosses, and then the feasibility layer blends
towards the safe rule (whose own gap is 10-50 %). This prints, per problem and objective, over
``--instances`` sampled inputs:

* the mean number of binding inequality rows, the number of distinct active sets, and the quadratic
  term's share of the optimal cost;
* for each ``--noise`` level eps: the optimum plus Gaussian noise of standard deviation ``eps * rms(y*)`` per
  entry (a network that is almost right), passed through the equality projection and the blend with the
  problem's decision rule: the fraction of instances the blend moves (alpha > 0), the mean alpha, and the
  mean optimality gap that remains.

    python scripts/maintainers/solution_structure.py --problems dcopf_118 dcopf_200 --instances 100
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from hardlinear.layers import FeasibilityLayer
from hardlinear.problems import build_problem
from hardlinear.rules import solve_decision_rule

# A row binds when its slack is below ACTIVE_RTOL * (1 + |h_i|): the solvers' own tolerances are 1e-8 to 1e-9,
# and a slack this small moves the objective by far less than the gaps we compare.
ACTIVE_RTOL = 1e-6


def active_rows(problem, xi: np.ndarray, y_orig: np.ndarray) -> list[frozenset[int]]:
    """The binding inequality rows ``H y <= h`` of each solved instance."""
    sets = []
    for x, y in zip(xi, y_orig):
        _, _, H, h = problem.compact.instance(x)
        slack = h - H @ y
        sets.append(frozenset(np.flatnonzero(slack <= ACTIVE_RTOL * (1.0 + np.abs(h))).tolist()))
    return sets


def quadratic_share(problem, y_orig: np.ndarray) -> float:
    """Mean over instances of ``1/2 y'Qy / |f(y)|`` at the optimum (0 for a linear objective)."""
    obj = problem.objective_data
    if not obj.is_quadratic:
        return 0.0
    quad = 0.5 * np.einsum("bi,bi->b", y_orig, (obj.Q @ y_orig.T).T)
    total = quad + y_orig @ obj.c
    return float(np.mean(quad / np.abs(total)))


def blend_of_noisy_optimum(problem, layer, xi: torch.Tensor, y_star: torch.Tensor, eps: float, seed: int) -> dict:
    """The layer's output for the optimum plus noise of relative size ``eps``: share moved, mean alpha, mean gap."""
    noise = torch.randn(y_star.shape, generator=torch.Generator().manual_seed(seed), dtype=y_star.dtype)
    scale = y_star.pow(2).mean(dim=1, keepdim=True).sqrt()
    with torch.no_grad():
        y = layer(xi, y_star + eps * scale * noise)
        alpha = layer.last_stats["alpha"]
        f, f_star = problem.objective(xi, y), problem.objective(xi, y_star)
    gap = 100.0 * (f - f_star) / f_star.abs()
    return {"moved": float((alpha > 0).double().mean()), "alpha": float(alpha.mean()), "gap": float(gap.mean())}


def structure(name: str, objective: str, instances: int, seed: int, noise: list[float], cache_dir: str) -> dict:
    problem = build_problem(name, objective=objective, form="standard")
    xi = problem.sample(instances, generator=torch.Generator().manual_seed(seed)).numpy()
    solution = problem.solve(xi)
    y_orig = solution.y[:, : problem.n_orig]
    sets = active_rows(problem, xi, y_orig)
    sizes = np.array([len(s) for s in sets])
    rule = solve_decision_rule(problem, cache_dir=cache_dir, require_positive_margin=name != "portfolio")
    layer = FeasibilityLayer(problem.family, rule)
    xi_t, y_star = torch.as_tensor(xi), torch.as_tensor(solution.y)
    blends = {eps: blend_of_noisy_optimum(problem, layer, xi_t, y_star, eps, seed + 1) for eps in noise}
    return {
        "blends": blends,
        "problem": name,
        "objective": objective,
        "solver": solution.solver,
        "m_ineq": problem.m_ineq,
        "active_mean": float(sizes.mean()),
        "active_min": int(sizes.min()),
        "active_max": int(sizes.max()),
        "distinct_active_sets": len(set(sets)),
        "quadratic_share": quadratic_share(problem, y_orig),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", nargs="+", default=["dcopf_14", "dcopf_30", "dcopf_57", "dcopf_118", "dcopf_200"])
    parser.add_argument("--objectives", nargs="+", default=["lp", "qp"], choices=["lp", "qp"])
    parser.add_argument("--instances", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--noise", type=float, nargs="*", default=[1e-3, 1e-2], help="relative noise levels eps")
    parser.add_argument("--cache-dir", default="data/cache", help="where decision rules are cached")
    args = parser.parse_args()
    if args.instances < 1:
        parser.error("--instances must be at least 1")
    if any(eps < 0 for eps in args.noise):
        parser.error("--noise levels must be >= 0")
    torch.set_num_threads(1)
    noise_cols = "".join(f" eps={eps:g}: moved, mean alpha, gap % |" for eps in args.noise)
    print(f"| problem | objective | solver | inequality rows | binding rows: mean (min-max) | distinct active sets in {args.instances} | quadratic share of cost |{noise_cols}")
    print("|---|---|---|--:|--:|--:|--:|" + "--:|" * len(args.noise))
    for name in args.problems:
        for objective in args.objectives:
            r = structure(name, objective, args.instances, args.seed, args.noise, args.cache_dir)
            blends = "".join(f" {b['moved']:.2f}, {b['alpha']:.3f}, {b['gap']:.2f} |" for b in r["blends"].values())
            print(
                f"| {r['problem']} | {r['objective']} | {r['solver']} | {r['m_ineq']} | "
                f"{r['active_mean']:.1f} ({r['active_min']}-{r['active_max']}) | {r['distinct_active_sets']} | "
                f"{100 * r['quadratic_share']:.1f} % |{blends}",
                flush=True,
            )


if __name__ == "__main__":
    main()
