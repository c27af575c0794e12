"""A random parametric QP with a decision rule by construction, written as an ``.npz`` for ``problem=linear``.

The constraints are built around an affine point ``y(xi) = y0 + Y xi`` that meets every equality and lies inside
every inequality for every input in the box, so an affine decision rule exists; the cost (positive ``c``, a random
positive definite ``Q``) pulls the optimum away from that point, onto the inequalities. A check problem
for the methods' default trainer (docs/own_problem.md, "Defaults on one's own problem"), of another shape than the
building controller: 60 variables, 12 inputs, 15 equalities, 120 inequalities by default. Seeded: the same file
every time.

    python scripts/examples/random_qp.py data/examples/random_qp.npz
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def build(n: int = 60, k: int = 12, m_eq: int = 15, m_ineq: int = 120, boxed: int = 20, slack: float = 0.5,
          seed: int = 0) -> dict[str, np.ndarray]:
    """The problem's arrays (keys of hardlinear.problems.linear): ``n`` nonnegative variables with positive costs
    (so the optimal objective is positive and a relative gap means something), ``m_eq`` nonnegative "demand" rows,
    ``m_ineq`` rows in all: the ``n`` sign rows, ``boxed`` upper bounds and random capacity rows."""
    rng = np.random.default_rng(seed)
    y0 = 1.0 + rng.random(n)
    Y = 0.5 / k * rng.uniform(-1.0, 1.0, size=(n, k))          # y(xi) >= 0.5 over the box [-1, 1]^k
    G = rng.random((m_eq, n)) * (rng.random((m_eq, n)) < 0.3)   # demands met by a random third of the variables
    G[np.arange(m_eq), rng.integers(n, size=m_eq)] += 1.0       # no empty row
    rows = m_ineq - n - boxed
    if rows < 0:
        raise ValueError(f"m_ineq ({m_ineq}) must be at least n + boxed ({n + boxed}): sign rows and upper bounds")
    H = np.vstack([-np.eye(n), np.eye(n)[:boxed], rng.normal(size=(rows, n))])
    # y(xi) = y0 + Y xi meets G y = g0 + Gx xi exactly and every inequality with room on every row
    g0, Gx = G @ y0, G @ Y
    E = 2.0 * rng.uniform(-1.0, 1.0, size=(m_ineq, k))          # capacities that move with the input on their own
    room = slack * (1.0 + rng.random(m_ineq)) + np.abs(E).sum(axis=1)
    room[:n] = 0.0                                               # y >= 0 exactly; y(xi) >= 0.5 gives the room
    h0, Hx = H @ y0 + room, H @ Y + E                            # h(xi) - H y(xi) = room + E xi >= slack on the box
    h0[:n], Hx[:n] = 0.0, 0.0
    A = rng.normal(size=(n, n // 4))
    Q = np.diag(rng.uniform(0.05, 0.2, n)) + A @ A.T / n
    c = rng.uniform(1.0, 3.0, n)
    return dict(c=c, Q=Q, G=G, g0=g0, Gx=Gx, H=H, h0=h0, Hx=Hx, lo=-np.ones(k), hi=np.ones(k))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="the .npz to write")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.path.parent.mkdir(parents=True, exist_ok=True)
    arrays = build(seed=args.seed)
    np.savez(args.path, **arrays)
    print(f"wrote {args.path}: {arrays['c'].size} outputs, {arrays['lo'].size} inputs, {arrays['G'].shape[0]} equalities, "
          f"{arrays['H'].shape[0]} inequalities")


if __name__ == "__main__":
    main()
