"""Time the cost-aware rule on DC3's 50/50 QP constraints over its input box and over the box cut by two rows.

    python probes/polytope_rule_time.py          # prints one line per input set (docs/cost_aware_rule.md)

The polytope keeps the inputs whose sum lies within a quarter of the box's total width of the centre's sum. One
thread; the figures depend on the machine's load.
"""

import time
import warnings

import numpy as np

import hardlinear
from hardlinear.problems.dc3 import DC3QP


def main() -> None:
    problem = DC3QP()
    family, objective = problem.compact, problem.objective_data
    box = family.box
    centre, half = box.mid.sum(), 0.25 * (box.hi - box.lo).sum()
    rows = {
        "G": family.G.toarray(), "g": (family.B_eq[:, 0], family.B_eq[:, 1:]),
        "H": family.H.toarray(), "h": (family.B_ineq[:, 0], family.B_ineq[:, 1:]),
        "c": objective.c, "Q": objective.Q.toarray(), "lo": box.lo, "hi": box.hi,
    }
    cuts = {"A_in": np.vstack([np.ones((1, box.k)), -np.ones((1, box.k))]), "b_in": np.array([centre + half, half - centre])}
    for label, extra in (("box", {}), ("box cut by two rows", cuts)):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # DC3's margin is unbounded: warned and capped, as documented
            constraints = hardlinear.LinearConstraints(**rows, **extra)
            built = time.perf_counter()
            layer = hardlinear.feasibility_layer(constraints, progress=False)
        info = layer.safe.info
        print(
            f"{label}: checks {built - start:.2f} s, rule {time.perf_counter() - built:.2f} s, t = {layer.safe.t_star:.6g} "
            f"({info['status']}), expected cost {info['expected_cost']:.6g}"
        )


if __name__ == "__main__":
    main()
