"""DC3's "simple" QP family (generator written from the paper's description, not DC3's data/seed): n=100,
50 equalities G y = theta, 50 inequalities H y <= h, h = sum |H pinv(G)| (so y = pinv(G) theta is feasible),
objective 1/2 y'Qy + p'y, Q = diag(U[0,1)), p = U[0,1), theta in [-1, 1]^50. LDR gap of the capped margin rule
and of the cost-aware rule against Clarabel's optimum on 100 inputs, with both rule solvers.

    python probes/dc3_like_rule_study.py        (docs/cost_aware_rule.md; about a minute)

The feasible set is unbounded (no variable bounds), so the margin is capped (the warning says so); this is a
stand-in for developer 18b's ``problem=dc3_qp`` (DC3's own generator and seed), not DC3's dataset.
"""

import time
import warnings

import clarabel
import numpy as np
import scipy.sparse as sp
import torch

import hardlinear
from hardlinear.rules.decision_rule import solve_decision_rule

rng = np.random.default_rng(2021)
n, meq, mineq = 100, 50, 50
Q = np.diag(rng.random(n))
p = rng.random(n)
A = rng.standard_normal((meq, n))
Hm = rng.standard_normal((mineq, n))
h = np.abs(Hm @ np.linalg.pinv(A)).sum(axis=1)
lo, hi = -np.ones(meq), np.ones(meq)
cons = hardlinear.LinearConstraints(lo, hi, G=A, g=(np.zeros(meq), np.eye(meq)), H=Hm, h=h, c=p, Q=Q)
theta = cons.box.sample(100, torch.Generator().manual_seed(0)).numpy()


def opt(th: np.ndarray) -> float:
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    cones = [clarabel.ZeroConeT(meq), clarabel.NonnegativeConeT(mineq)]
    A_all, b = sp.csc_matrix(np.vstack([A, Hm])), np.concatenate([th, h])
    sol = clarabel.DefaultSolver(sp.csc_matrix(Q), p, A_all, b, cones, settings).solve()
    y = np.asarray(sol.x)
    return 0.5 * y @ Q @ y + p @ y


f_opt = np.array([opt(t) for t in theta])
for ro in ("margin", "cost"):
    for solver in ("clarabel", "highs"):
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            rule = solve_decision_rule(cons, solver=solver, rule_objective=ro)
        y = rule(torch.as_tensor(theta)).numpy()
        f = 0.5 * np.einsum("bi,ij,bj->b", y, Q, y) + y @ p
        gap = 100 * np.mean((f - f_opt) / np.abs(f_opt))
        viol = max((y @ Hm.T - h).max(), np.abs(y @ A.T - theta).max())
        print(f"{ro:6s} {solver:8s} status={rule.info['status']:8s} t={rule.t_star:.4g} max|F|={np.abs(rule.F.numpy()).max():.3g} "
              f"LDR gap={gap:.2f}% (mean opt {f_opt.mean():.3f}) worst viol={viol:.1e} {time.perf_counter()-t0:.1f}s warned={bool(w)}")
