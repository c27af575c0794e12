"""The size of the first working-set LP that ``rule_solver=clarabel|highs|pdlp`` (``hardlinear.rules.robust_lp``)
would hand its solver, counted without building it: where the time and memory of those solvers go before any LP
solver starts (issue 42, item 5). Runs the same steps as ``solve_robust_lp`` up to its first round (``_reduce``,
the margin cap's recession LP, ``_seed``), times each with the process's peak RSS, then counts the nonzeros of
``_working_set_lp(red, seed)`` from ``M``'s rows in the seed (:func:`working_set_lp_nnz`, checked against the
built LP in ``tests/test_bench_rule_solvers.py``). Example::

    python benchmarks/investigations/working_set_lp_size.py pglib_opf_case2848_rte --inputs all_buses --out size.json
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import numpy as np


def working_set_lp_nnz(M_S, lower_S: np.ndarray, q: int) -> dict:
    """Nonzeros of ``_working_set_lp`` for the working set's rows ``M_S`` (E x d), their lower bounds and ``q``
    moving inputs: its equalities hold ``q`` copies of ``M_S`` (``kron(I_q, M_S)``, one per input's column of the
    rule) and the ``2 E q`` absolute values; its inequalities ``M_S`` once more (twice on two-sided rows)."""
    E = M_S.shape[0]
    nnz_m = int(np.count_nonzero(M_S))
    two = np.asarray(lower_S) >= 0
    nnz_two = int(np.count_nonzero(M_S[two]))
    abs_rows = q * nnz_m + 2 * E * q
    spread_rows = 2 * E * q + E
    ineq = nnz_m + E + E + nnz_two + int(two.sum()) * 2
    return {"expressions": E, "nnz_M_S": nnz_m, "copies_of_M_S": q, "nnz_eq": abs_rows + spread_rows, "nnz_ineq": ineq,
            "nnz_total_upper_bound": abs_rows + spread_rows + ineq,
            "variables": M_S.shape[1] * (q + 1) + 2 * E * q + E + 1}


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(case: str, inputs: str, uncertainty: float) -> dict:
    from hardlinear.problems import build_problem
    from hardlinear.rules.robust_lp import _margin_cap, _reduce, _seed, row_weights

    out: dict = {"case": case, "inputs": inputs, "uncertainty": uncertainty}
    t = time.perf_counter()
    problem = build_problem("dcopf", case=case, uncertainty=uncertainty, inputs=inputs)
    family = problem.compact
    weights = row_weights(family.H, problem.form)
    out["build_s"], out["build_peak_mb"] = round(time.perf_counter() - t, 1), round(_peak_mb())
    t = time.perf_counter()
    red = _reduce(family, weights, None)
    out["reduce_s"], out["reduce_peak_mb"] = round(time.perf_counter() - t, 1), round(_peak_mb())
    d, q, E = red.N.shape[1], red.C.shape[1], len(red.upper)
    out.update(null_dim=d, moving_inputs=q, expressions=E, M_shape=list(red.M.shape))
    t = time.perf_counter()
    _margin_cap(red, family, weights, "auto", {})
    out["margin_cap_s"], out["margin_cap_peak_mb"] = round(time.perf_counter() - t, 1), round(_peak_mb())
    t = time.perf_counter()
    S = _seed(red)
    out["seed_s"], out["seed_peak_mb"] = round(time.perf_counter() - t, 1), round(_peak_mb())
    M_S = np.asarray(red.M[S])
    out["first_working_set_lp"] = working_set_lp_nnz(M_S, red.lower[S], q)
    # CSR of the equality block alone: 8-byte values and 4-byte column indices (8-byte beyond 2**31 nonzeros)
    nnz = out["first_working_set_lp"]["nnz_eq"]
    out["csr_eq_block_gb_at_least"] = round(nnz * (8 + (4 if nnz < 2**31 else 8)) / 1e9, 2)
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("case")
    p.add_argument("--inputs", default="all_buses")
    p.add_argument("--uncertainty", type=float, default=0.02)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    row = measure(args.case, args.inputs, args.uncertainty)
    print(json.dumps(row, indent=1))
    if args.out:
        path = Path(args.out)
        record = json.loads(path.read_text()) if path.exists() else {"rows": []}
        record["rows"].append(row)
        path.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
