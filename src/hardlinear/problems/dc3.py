"""DC3's benchmark QPs (Donti, Rolnick, Kolter, ICLR 2021), generated exactly as DC3's "simple" dataset.

DC3's problem, for an input ``x`` in ``[-1, 1]^{num_eq}``::

    min_y 1/2 y' Q y + p' y        (dc3_qp)      or      1/2 y' Q y + p' sin(y)   (dc3_nonconvex)
    s.t.  A y = x,   G y <= h

The data follow DC3's generator draw for draw: one legacy NumPy stream seeded with 17 draws, in this order,
``diag(Q) ~ U[0, 1)^n``, ``p ~ U[0, 1)^n``, ``A ~ N(0, 1)^{num_eq x n}``, the ``num_examples`` inputs
``X ~ U[-1, 1)^{num_examples x num_eq}``, ``G ~ N(0, 1)^{num_ineq x n}``; then ``h_i = sum_j |(G A^+)_ij|``
(``A^+`` the pseudo-inverse), which makes ``y = A^+ x`` feasible for every ``x`` in the box. The same stream
then picks DC3's partial variables (``num_var - num_eq`` of them, uniformly without replacement, redrawn until
``|det A_other| >= 1e-4``), which its completion and correction use. DC3 keeps an instance only if its solver
solved it; by the choice of ``h`` every instance is feasible, so all 10,000 are kept.

Split (DC3's ``valid_frac = test_frac = 0.0833``, in the order of ``X``): the first ``int(N * (1 - 2 * 0.0833))``
inputs train (8,334 of 10,000), the next up to ``int(N * (1 - 0.0833))`` validate (833), the rest test (833).

Pinet's benchmark used another split of the same X (``split="pinet"``: train 7,952, validate 1,024, test the last
1,024 rows, which contain DC3's 833 test rows).

In our convention the input is ``xi = x`` (``k = num_eq``, box ``[-1, 1]^k``): ``g(x) = xi``, ``h`` constant.
The variables are free, so the feasible set is unbounded (the decision rule's margin then needs care).
The nonconvex problem's reference solutions are *local* optima (SLSQP from ``A^+ x``, DC3 used IPOPT from the
same start), so its gaps are against a local reference and may be negative.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hardlinear.problems.base import Form, Objective, Problem
from hardlinear.problems.linear import family_from_arrays

DC3_SEED = 17
DC3_VALID_FRAC = 0.0833
DC3_TEST_FRAC = 0.0833
# DC3 redraws its partial variables until the dependent columns' determinant is at least this, 100 tries at most.
DC3_MIN_DET = 1e-4
DC3_MAX_TRIES = 100
# Splits of X: DC3's own (8334/833/833), or Pinet's for its DC3 benchmark (antonioterpin/pinet @ 8115a87,
# src/benchmarks/QP/datasets/dc3_random_*_ex10000{valid,test}.npz hold X's rows 7952..8975 and 8976..9999, in
# order): the last 1024 rows test, the 1024 before them validate, the rest train (7952 of 10,000).
SPLITS = ("dc3", "pinet")
PINET_HOLDOUT = 1024


@dataclass(frozen=True)
class DC3Data:
    """The arrays of one DC3 "simple" dataset; ``partial_vars`` are the variables DC3's network predicts."""

    Q: np.ndarray  # (n, n) diagonal
    p: np.ndarray  # (n,)
    A: np.ndarray  # (num_eq, n)
    X: np.ndarray  # (num_examples, num_eq)
    G: np.ndarray  # (num_ineq, n)
    h: np.ndarray  # (num_ineq,)
    partial_vars: np.ndarray  # (n - num_eq,), in DC3's (unsorted) order

    def split_bounds(self, valid_frac: float = DC3_VALID_FRAC, test_frac: float = DC3_TEST_FRAC) -> tuple[int, int]:
        """``(end of train, end of validation)`` in rows of ``X``, with DC3's float arithmetic."""
        num = self.X.shape[0]
        train_frac = 1 - valid_frac - test_frac
        return int(num * train_frac), int(num * (train_frac + valid_frac))

    def splits(self, split: str = "dc3") -> dict[str, np.ndarray]:
        """The inputs of each split: ``dc3`` (DC3's fractions) or ``pinet`` (the last 2 x 1024 rows held out)."""
        if split == "pinet":
            if self.X.shape[0] <= 2 * PINET_HOLDOUT:
                raise ValueError(f"split=pinet holds out 2 x {PINET_HOLDOUT} rows; num_examples is {self.X.shape[0]}")
            a, b = self.X.shape[0] - 2 * PINET_HOLDOUT, self.X.shape[0] - PINET_HOLDOUT
        elif split == "dc3":
            a, b = self.split_bounds()
        else:
            raise ValueError(f"split must be one of {SPLITS}; got {split!r}")
        return {"train": self.X[:a], "val": self.X[a:b], "test": self.X[b:]}


def dc3_simple_data(num_var: int = 100, num_eq: int = 50, num_ineq: int = 50, num_examples: int = 10000, seed: int = DC3_SEED) -> DC3Data:
    """DC3's "simple" dataset, draw for draw (module docstring)."""
    if not 0 < num_eq < num_var:
        raise ValueError(f"need 0 < num_eq < num_var (DC3 predicts num_var - num_eq variables); got num_eq={num_eq}, num_var={num_var}")
    if num_ineq < 1 or num_examples < 3:
        raise ValueError(f"need num_ineq >= 1 and num_examples >= 3 (three splits); got {num_ineq}, {num_examples}")
    rng = np.random.RandomState(seed)  # DC3 seeds NumPy's legacy global stream; this is the same stream
    Q = np.diag(rng.random_sample(num_var))
    p = rng.random_sample(num_var)
    A = rng.normal(loc=0.0, scale=1.0, size=(num_eq, num_var))
    X = rng.uniform(-1.0, 1.0, size=(num_examples, num_eq))
    G = rng.normal(loc=0.0, scale=1.0, size=(num_ineq, num_var))
    h = np.abs(G @ np.linalg.pinv(A)).sum(axis=1)
    for _ in range(DC3_MAX_TRIES):
        partial = rng.choice(num_var, num_var - num_eq, replace=False)
        other = np.setdiff1d(np.arange(num_var), partial)
        if abs(np.linalg.det(A[:, other])) >= DC3_MIN_DET:
            break
    else:
        raise ValueError(f"no partial variables with |det A_other| >= {DC3_MIN_DET} in {DC3_MAX_TRIES} draws (DC3 fails here too)")
    return DC3Data(Q=Q, p=p, A=A, X=X, G=G, h=h, partial_vars=partial)


class DC3QP(Problem):
    """DC3's convex QP ``min 1/2 y'Qy + p'y  s.t.  A y = x, G y <= h`` on its own data and split."""

    nonconvex = False

    def __init__(
        self,
        num_eq: int = 50,
        num_ineq: int = 50,
        num_var: int = 100,
        num_examples: int = 10000,
        seed: int = DC3_SEED,
        form: Form = "inequality",
        name: str | None = None,
        split: str = "dc3",
    ) -> None:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}; got {split!r}")
        data = dc3_simple_data(num_var, num_eq, num_ineq, num_examples, seed)
        arrays = {
            "c": np.zeros(num_var), "Q": data.Q, "G": data.A, "Gx": np.eye(num_eq), "H": data.G, "h0": data.h,
            "lo": -np.ones(num_eq), "hi": np.ones(num_eq),
        }
        family, objective, _ = family_from_arrays(arrays)
        if self.nonconvex:
            objective = Objective(c=np.zeros(num_var), Q=objective.Q, sine=data.p)
            kind = "nonconvex"
        else:
            objective = Objective(c=data.p, Q=objective.Q)
            kind = "qp"
        base = "dc3_nonconvex" if self.nonconvex else "dc3_qp"
        suffix = "" if split == "dc3" else f"_{split}split"
        super().__init__(family, objective, kind, form, name or f"{base}_eq{num_eq}_ineq{num_ineq}{suffix}")
        self.data = data
        self.num_eq, self.num_ineq = num_eq, num_ineq
        self.split = split
        self.given_inputs = data.splits(split)

    def completion_partial_vars(self) -> np.ndarray:
        """The variables DC3's own code predicts (its completion solves for the others); in the form's
        numbering, which keeps the original variables first."""
        return np.sort(self.data.partial_vars)


class DC3Nonconvex(DC3QP):
    """DC3's nonconvex problem: the same constraints, objective ``1/2 y'Qy + p' sin(y)``."""

    nonconvex = True
