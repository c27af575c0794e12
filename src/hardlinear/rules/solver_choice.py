"""Which rule solver ``solver="auto"`` picks: the one a cost model fitted to measurements predicts fastest.

The model is one power law per solver in the size that solver's work grows with, read from the problem's data
before anything is built (:func:`rule_features`)::

    predicted seconds = 10**a * size**b

fitted by least squares in log-log space to the solve times of ``benchmarks/bench_rule_solvers.py`` (every
PGLib case of 14 to 3,000 buses at 2 % uncertainty, one process per solve; the data and the fit are in
``results/bench/rule_solvers*.json`` and ``results/bench/rule_solver_cost_model.json``, the table in
benchmarks/README.md). A solve that ran past the benchmark's budget is a lower bound: the fitted intercept is
raised until the model predicts at least the budget there. The constants below are that fit (a test checks them
against the JSON). The times were taken on a shared, loaded 2-core machine: absolute predictions are
pessimistic, the *ratios* between solvers are what the choice uses.

The model is used where its data came from: power grids (a DC-OPF: ``problem.network``) with every bus an input.
User constraints and the other problems stay on Clarabel, the general solver; grids with other inputs (loaded
buses only, zones, areas: never measured here) keep issue 20's measured rule (decision_rule.py,
``AGGREGATED_CLARABEL_MAX_ROWS``). Only a solver that applies is a candidate: the large-grid solvers ("sparse", "reduced") solve the margin rule
over an input box; the cost rule, an input polytope and the SDP (input-dependent left-hand side) stay on
Clarabel. One exception is kept by name, not by size: the paper's own problems (``RECORDED_WITH_CLARABEL``), whose
recorded rules (results/paper) Clarabel solved. A rule's LP has many optimal rules of the same margin t*: another
solver would give another optimal ``F``, and every trained figure of the paper would move. Their solves take
seconds, so the pin costs little; ``rule_solver=<name>`` overrides it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import scipy.sparse as sp

log = logging.getLogger(__name__)

RECORDED_WITH_CLARABEL = frozenset({"dcopf_14", "dcopf_30", "dcopf_57", "dcopf_118", "dcopf_200"})
"""Problems (``problem.name``) whose recorded rules Clarabel solved: ``auto`` keeps it for them."""

SIZES: dict[str, Callable[[dict], float]] = {
    # the dense robust LP: one dual block per inequality row and input (rows x (inputs + 1) unknowns)
    "clarabel": lambda f: f["m_ineq"] * (f["k"] + 1),
    "highs": lambda f: f["m_ineq"] * (f["k"] + 1),
    # the whole LP in the grid's variables: its nonzeros (robust_lp_sparse.sparse_lp_nonzeros)
    "sparse": lambda f: f["sparse_lp_nnz"],
    # the structured interior point: rows x active inputs x the rule's free dimension
    "reduced": lambda f: f["m_ineq"] * max(f["active_inputs"], 1) * max(f["null_dim"], 1),
}
"""The size each solver's time is fitted against."""

# (a, b) of ``log10 seconds = a + b log10 size``: the fit of results/bench/rule_solver_cost_model.json
COST_MODEL: dict[str, tuple[float, float]] = {
    "clarabel": (0.801447280095662, 0.2086614610566851),
    "highs": (1.6393421763396414, 0.02965494671779312),
    "sparse": (-4.073548671231509, 1.0806849995295493),
    "reduced": (-1.0822652277624987, 0.4303843293510752),
}

# the smallest size at which each solver ran past the benchmark's budget (rule_solver_cost_model.json: lower_bounds)
EXCEEDED_AT: dict[str, float] = {'clarabel': 47952.0, 'highs': 47952.0, 'sparse': 259900.0, 'reduced': 186316416.0}


def rule_features(problem) -> dict:
    """The sizes the solver choice reads, from the problem's data alone (nothing solved), of the LP that is solved
    (without free slack columns, :mod:`hardlinear.rules.free_slack`): rows, inputs, the
    inputs that move a right-hand side, nonzeros, the null-space dimension ``n - m_eq`` (``G`` has full row rank
    on the grids), the sparse solver's LP nonzeros and the dense LP's ``rows x (inputs + 1)``."""
    from hardlinear.rules.free_slack import eliminate_free_slacks
    from hardlinear.rules.robust_lp_sparse import _active_inputs, sparse_lp_nonzeros

    c = problem.compact
    if (smaller := eliminate_free_slacks(c)) is not None:  # the LP that is solved (decision_rule._solve)
        c = smaller.family
    G, H = sp.csr_matrix(c.G), sp.csr_matrix(c.H)
    n = G.shape[1]
    _, _, active = _active_inputs(c)
    return {
        "n": int(n), "m_eq": int(G.shape[0]), "m_ineq": int(H.shape[0]), "k": int(c.box.k),
        "active_inputs": int(len(active)), "nnz_G": int(G.nnz), "nnz_H": int(H.nnz),
        "null_dim": int(n - G.shape[0]), "sparse_lp_nnz": int(sparse_lp_nonzeros(c)),
        "dense_lp_size": int(H.shape[0]) * int(c.box.k + 1),
    }


def predicted_seconds(features: dict, solver: str, model: dict[str, tuple[float, float]] | None = None) -> float:
    """The cost model's solve time for ``solver`` on a problem of these features; infinite from the size at which
    the solver ran past the benchmark's budget (``EXCEEDED_AT``), since a power law fitted to a few small cases
    says nothing about growth beyond it."""
    size = max(SIZES[solver](features), 1.0)
    if model is None and size >= EXCEEDED_AT.get(solver, math.inf):
        return math.inf
    a, b = (model or COST_MODEL)[solver]
    return 10.0 ** (a + b * math.log10(size))


def choose(features: dict, candidates: tuple[str, ...], model: dict[str, tuple[float, float]] | None = None) -> tuple[str, dict[str, float]]:
    """``(solver, {candidate: predicted seconds})``: the candidate the model predicts fastest."""
    if not candidates:
        raise ValueError("no rule solver applies")
    predicted = {s: predicted_seconds(features, s, model) for s in candidates}
    if all(math.isinf(v) for v in predicted.values()):  # beyond every solver's measured range: the one that went furthest
        return max(candidates, key=lambda s: EXCEEDED_AT.get(s, math.inf)), predicted
    return min(predicted, key=predicted.get), predicted
