"""The safe network: an affine decision rule computed offline once per problem (paper section 4).

:func:`solve_decision_rule` picks the robust LP (:mod:`hardlinear.rules.robust_lp`, jointly linear
families) or the SDP (:mod:`hardlinear.rules.robust_sdp`, input-dependent left-hand sides), verifies the
rule in float64, caches it on disk, and returns a :class:`DecisionRule` module. A rule whose verified margin
``t*`` is not positive raises :class:`DecisionRuleInfeasible`, which reports the largest uncertainty level
for which a rule exists when the problem can be rebuilt at other levels.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import os
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from hardlinear.constraints.family import lift
from hardlinear.rules.free_slack import eliminate_free_slacks
from hardlinear.runtime.atomic import atomic_write_bytes

log = logging.getLogger(__name__)

# Bump when the formulation or the stored payload changes: old cache files are then ignored.
FORMULATION_VERSION = "dr-v1"
CACHE_MAGIC = b"HLRULE1\n"
# A margin above -WEAK_MARGIN is "zero" when require_positive_margin=False (solver accuracy ~1e-8).
WEAK_MARGIN = 1e-6


class DecisionRuleInfeasible(ValueError):
    """No decision rule with a positive margin exists (or its program is infeasible)."""

    def __init__(self, message: str, t_star: float = float("nan"), max_uncertainty: float | None = None) -> None:
        super().__init__(message)
        self.t_star = t_star
        self.max_uncertainty = max_uncertainty


class DecisionRule(torch.nn.Module):
    """``xi: (B, k) -> y: (B, n)``, the rule in the problem's form, feasible for every xi in the box.

    ``y = linear x`` (``x = (1, xi)``), and, for input-dependent families in the standard form, slacks
    ``s_l = x' quadratic_l x`` appended. For jointly linear families in the standard form the slacks
    ``h(x) - H F x = (B_ineq - H F) x`` are affine and folded into ``linear`` (computed in float64), so
    ``H y + s = h`` holds up to the rounding of one matrix product. Computation follows the input's dtype.
    The coefficients stay float64 under ``.to(dtype)``, ``.float()`` and ``.half()`` (a move to another device
    is followed): ``t*`` is verified for the float64 rule, and a float32 copy of it can lose a margin below the
    float32 rounding (case89_pegase: ``t* = 3.9e-8``); a float32 input still computes in float32.
    """

    def __init__(
        self,
        linear: torch.Tensor | np.ndarray,
        quadratic: torch.Tensor | np.ndarray | None = None,
        *,
        n_orig: int | None = None,
        form: str = "standard",
        t_star: float = float("nan"),
        binding_row: int = -1,
        binding_description: str = "",
        info: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        linear = _as_float64(linear)
        if linear.ndim != 2:
            raise ValueError(f"linear must be (n, k + 1); got shape {tuple(linear.shape)}")
        self.register_buffer("linear", linear)
        if quadratic is not None:
            quadratic = _as_float64(quadratic)
            K = linear.shape[1]
            if quadratic.ndim != 3 or quadratic.shape[1:] != (K, K):
                raise ValueError(f"quadratic must be (m, {K}, {K}); got shape {tuple(quadratic.shape)}")
        self.register_buffer("quadratic", quadratic)
        self.n_orig = int(n_orig if n_orig is not None else linear.shape[0])
        self.form = form
        self.t_star = float(t_star)
        self.binding_row = int(binding_row)
        self.binding_description = binding_description
        self.info: dict[str, Any] = dict(info or {})

    def _apply(self, fn, recurse: bool = True):  # noqa: ANN001 - torch's own signature
        for name, buf in self._buffers.items():  # device moves only: see the class docstring
            if buf is not None:
                self._buffers[name] = buf.to(fn(torch.empty(0, dtype=buf.dtype, device=buf.device)).device)
        return self

    @property
    def k(self) -> int:
        return self.linear.shape[1] - 1

    @property
    def n(self) -> int:
        return self.linear.shape[0] + (0 if self.quadratic is None else self.quadratic.shape[0])

    @property
    def F(self) -> torch.Tensor:
        """``(n_orig, k + 1)``: the rule on the original variables, ``y_orig = F x``."""
        return self.linear[: self.n_orig]

    def _sparse_columns(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        """``(active inputs, bias (n,), F_active' (k_active, n))`` when a large rule has input columns that are
        all zero (DC-OPF with inputs=all_buses: the buses without load), else None. Cached per weights and dtype.

        Why: at 2,000 buses ``F x`` is the training step's largest product and half its columns are zero; below
        ``SPARSE_COLUMNS_MIN_SIZE`` entries the full product is kept (bit for bit the recorded results)."""
        linear = self.linear
        if linear.numel() <= SPARSE_COLUMNS_MIN_SIZE:
            return None
        key = (linear.data_ptr(), linear._version, linear.device, dtype)
        cached = self.__dict__.get("_columns_cache")
        if cached is None or cached[0] != key:
            used = (linear[:, 1:] != 0).any(dim=0)
            parts = None
            if not bool(used.all()):
                active = torch.nonzero(used).squeeze(1)
                parts = (active, linear[:, 0].to(dtype), linear[:, 1:].index_select(1, active).T.contiguous().to(dtype))
            cached = (key, parts)
            self.__dict__["_columns_cache"] = cached
        return cached[1]

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k) -> (B, n)`` in ``xi``'s dtype."""
        if xi.ndim != 2 or xi.shape[1] != self.k:
            raise ValueError(f"xi must be (B, {self.k}); got {tuple(xi.shape)}")
        x = lift(xi)
        parts = self._sparse_columns(x.dtype) if self.quadratic is None else None
        if parts is not None:
            active, bias, weight_T = parts
            return torch.addmm(bias, xi.to(x.dtype).index_select(1, active), weight_T)
        y = x @ self.linear.to(x.dtype).T
        if self.quadratic is None:
            return y
        slack = torch.einsum("bi,lij,bj->bl", x, self.quadratic.to(x.dtype), x)
        return torch.cat([y, slack], dim=1)

    # --- state_dict carries the metadata too -------------------------------------------------------
    def get_extra_state(self) -> dict[str, Any]:
        return {
            "n_orig": self.n_orig,
            "form": self.form,
            "t_star": self.t_star,
            "binding_row": self.binding_row,
            "binding_description": self.binding_description,
            "info": json.dumps(self.info),
        }

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.n_orig = int(state["n_orig"])
        self.form = str(state["form"])
        self.t_star = float(state["t_star"])
        self.binding_row = int(state["binding_row"])
        self.binding_description = str(state["binding_description"])
        self.info = json.loads(state["info"])

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> DecisionRule:
        """Rebuild a rule from ``rule.state_dict()`` without solving anything."""
        rule = cls(state["linear"], state.get("quadratic"))
        rule.load_state_dict(state)
        return rule

    def extra_repr(self) -> str:
        return f"k={self.k}, n={self.n}, form={self.form}, t_star={self.t_star:.6g}, binding_row={self.binding_row}"


# DecisionRule.forward skips all-zero input columns of rules with more entries than this (case500_goc's standard
# form, 2.25e6 entries, and everything smaller keep the full product).
SPARSE_COLUMNS_MIN_SIZE = 4_000_000


def _as_float64(value: torch.Tensor | np.ndarray) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.detach().to(torch.float64)
    return torch.as_tensor(np.asarray(value), dtype=torch.float64)


# --- solving --------------------------------------------------------------------------------------------
# solver="auto" picks by the cost model of hardlinear.rules.solver_choice (fitted to benchmarks/bench_rule_solvers.py)
# the solvers for large grids, beside the LP solvers of robust_lp: the whole LP kept sparse, and the structured
# row generation
LARGE_GRID_SOLVERS = ("sparse", "reduced")
# solvers for a structure of the LP rather than its size: rank_one, the LP whose inputs enter through one functional
# (hardlinear.rules.rank_one: the economic dispatch, through the total load), solved with that one input
STRUCTURE_SOLVERS = ("rank_one",)
# grids with other inputs (loaded buses, zones, areas) are outside the cost model's data (every bus an input): there auto
# keeps the choice measured in issue 20 (benchmarks/README.md): Clarabel up to this many inequality rows, then the
# sparse solver while its LP fits SPARSE_MAX_NONZEROS (one area at case6470 and case13659), else reduced
AGGREGATED_CLARABEL_MAX_ROWS = 4000


def _resolve_solver(problem, solver: str, rule_objective: str = "margin") -> str:
    from hardlinear.rules.robust_lp import LP_SOLVERS
    from hardlinear.rules.robust_sdp import SDP_SOLVERS

    sdp = problem.compact.input_dependent_lhs
    # reduced: hardlinear.rules.reduced; sparse: hardlinear.rules.robust_lp_sparse
    valid = SDP_SOLVERS if sdp else (*LP_SOLVERS, *LARGE_GRID_SOLVERS, *STRUCTURE_SOLVERS)
    if solver == "auto":
        return _auto_solver(problem, rule_objective)
    if solver not in valid:
        kind = "SDP (input-dependent left-hand side)" if sdp else "robust LP"
        raise ValueError(f"solver {solver!r} cannot solve the {kind}; choose 'auto' or one of {valid}")
    return solver


def _auto_solver(problem, rule_objective: str) -> str:
    """The solver ``solver="auto"`` hands ``problem`` to: Clarabel for the SDP, the cost rule and input polytopes
    (the only solver that takes them), else the fastest predicted by the cost model
    (:func:`hardlinear.rules.solver_choice.choose`) among Clarabel, HiGHS and the large-grid solvers (the sparse
    one only up to ``SPARSE_MAX_NONZEROS``: its memory), on the power grids the model was fitted on (a DC-OPF:
    ``problem.network``, every bus an input; any other problem stays on Clarabel, the general solver, and grids with
    other inputs keep issue 20's rule, ``AGGREGATED_CLARABEL_MAX_ROWS``), except for the paper's problems, whose
    recorded rules Clarabel solved (``RECORDED_WITH_CLARABEL``). Logs the predictions and the choice."""
    from hardlinear.rules.robust_lp_sparse import SPARSE_MAX_NONZEROS
    from hardlinear.rules.solver_choice import RECORDED_WITH_CLARABEL, choose, predicted_seconds, rule_features

    compact = problem.compact
    if compact.input_dependent_lhs:
        return "clarabel"
    features = rule_features(problem)
    if rule_objective != "margin" or getattr(compact, "polytope", None) is not None:
        guess = predicted_seconds(features, "clarabel")
        (log.warning if guess > 600 else log.info)(
            "decision rule of %s: the structured solvers handle only the margin rule over a box; Clarabel solves this "
            "%s (cost model: about %.0f s)", problem.name, "cost rule" if rule_objective != "margin" else "input polytope", guess,
        )
        if rule_objective == "margin" and guess > RANK_ONE_HINT_S:
            _hint_rank_one(problem)
        return "clarabel"
    if getattr(problem, "network", None) is None:
        log.debug("rule_solver=auto for %s: Clarabel (the cost model is fitted on power grids only)", getattr(problem, "name", "constraints"))
        return "clarabel"
    if getattr(problem, "inputs", "all_buses") != "all_buses":  # other inputs: outside the model's data
        if compact.m_ineq <= AGGREGATED_CLARABEL_MAX_ROWS:
            return "clarabel"
        return "sparse" if features["sparse_lp_nnz"] <= SPARSE_MAX_NONZEROS else "reduced"
    if problem.name in RECORDED_WITH_CLARABEL:
        log.info("rule_solver=auto for %s: Clarabel, the solver of its recorded rules (rule_solver=... to choose another)", problem.name)
        return "clarabel"
    candidates = ("clarabel", "highs", "reduced") + (("sparse",) if features["sparse_lp_nnz"] <= SPARSE_MAX_NONZEROS else ())
    solver, predicted = choose(features, candidates)
    log.info(
        "rule_solver=auto for %s (%d rows, %d inputs, null-space dimension %d): predicted %s -> %s",
        problem.name, features["m_ineq"], features["k"], features["null_dim"],
        ", ".join(f"{name} {seconds:.3g} s" for name, seconds in sorted(predicted.items(), key=lambda kv: kv[1])), solver,
    )
    if predicted[solver] > RANK_ONE_HINT_S:
        _hint_rank_one(problem)
    return solver


# auto's predicted time beyond which it says so when rule_solver=rank_one applies
RANK_ONE_HINT_S = 60.0


def _hint_rank_one(problem) -> None:
    """Warn, naming the option, where the LP auto hands to a slow solver has the structure rank_one solves in
    seconds. auto does not take it itself: the recorded rules of these problems came from the solvers it picks, and
    another solver returns another optimal rule (same t*), which moves the trained figures."""
    from hardlinear.rules.rank_one import rank_one_inputs

    elimination = eliminate_free_slacks(problem.compact)
    if rank_one_inputs(problem.compact if elimination is None else elimination.family) is not None:
        log.warning(
            "decision rule of %s: its %d inputs enter through one functional, so rule_solver=rank_one gives the same t* "
            "with one input, in seconds (another optimal rule than auto's: hardlinear.rules.rank_one)",
            problem.name, problem.compact.box.k,
        )


def _rule_cost(problem, rule_objective: str):
    """The objective the cost-aware rule minimises in expectation (None for the margin-only rule)."""
    from hardlinear.rules.cost import RULE_OBJECTIVES, RuleCost

    if rule_objective not in RULE_OBJECTIVES:
        raise ValueError(f"rule_objective must be one of {RULE_OBJECTIVES}; got {rule_objective!r}")
    if rule_objective == "margin":
        return None
    data = getattr(problem, "objective_data", None)
    if data is None:
        raise ValueError(
            "rule_objective='cost' needs an objective: give the constraints a cost (c, and Q for a quadratic one) "
            "or use rule_objective='margin'"
        )
    # LinearConstraints may carry an input-dependent cost c0 + C theta and the moments of its input set
    return RuleCost(data.c, data.Q, C=getattr(problem, "cost_input_matrix", None), moments=getattr(problem, "cost_moments", None))


def _solve(
    problem, solver: str, margin: str, threads: int, margin_gap: float = 0.0, *, rule_objective: str = "margin",
    margin_fraction: float = 0.5, max_margin: float | str | None = "auto", progress: bool = True, device: str = "cpu",
):
    """The rule's program for ``problem``; returns a :class:`~hardlinear.rules.robust_lp.RuleSolution`."""
    cost = _rule_cost(problem, rule_objective)
    if problem.compact.input_dependent_lhs:
        from hardlinear.rules.robust_sdp import sdp_row_weights, solve_robust_sdp

        weights = sdp_row_weights(problem.compact, problem.form)
        return solve_robust_sdp(problem.compact, weights, solver, margin, cost=cost, margin_fraction=margin_fraction)
    from hardlinear.rules.robust_lp import row_weights

    weights = row_weights(problem.compact.H, problem.form)
    lp = dict(solver=solver, threads=threads, margin_gap=margin_gap, cost=cost, margin_fraction=margin_fraction,
              max_margin=max_margin, progress=progress, device=device)
    elimination = eliminate_free_slacks(problem.compact) if cost is None else None
    if elimination is None:
        return _solve_lp(problem.compact, weights, **lp)
    sol = _solve_lp(elimination.family, weights[elimination.kept_rows], **lp)
    return _with_free_slacks(elimination, problem.compact, weights, sol)


def _with_free_slacks(elimination, family, weights: np.ndarray, sol):
    """The whole family's rule from the rule of its LP without free slacks (:mod:`hardlinear.rules.free_slack`),
    its margins verified over every row in float64: over the box for every row (a lower bound over a polytope inside
    it), and for the solved rows over an input polytope as the solver verified them."""
    from hardlinear.rules.free_slack import complete_rule
    from hardlinear.rules.reduced import verified_row_margins_chunked
    from hardlinear.rules.robust_lp import RuleSolution

    F = complete_rule(elimination, family, sol.F, sol.t_star, weights)
    margins = verified_row_margins_chunked(F, family.H, family.B_ineq, family.box, weights)
    if getattr(family, "polytope", None) is not None:  # the kept rows hold over the polytope: the solver verified
        kept = elimination.kept_rows  # their worst case there (a bound, like the box's, which is lower)
        margins[kept] = np.maximum(margins[kept], sol.row_margins)
    info = dict(sol.info, free_slacks=int(elimination.slack_columns.size), rows_with_free_slacks=int(elimination.dropped_rows.size))
    if "working_set_rows" in info:  # the smaller LP's row numbers -> the family's
        info["working_set_rows"] = elimination.kept_rows[np.asarray(info["working_set_rows"], dtype=int)].tolist()
    log.info(
        "decision rule: %d free slack columns and their %d rows taken out of the LP (%d rows, %d variables solved); "
        "verified margin %.6g over every row", elimination.slack_columns.size, elimination.dropped_rows.size,
        elimination.kept_rows.size, elimination.kept_columns.size, float(margins.min()),
    )
    return RuleSolution(F, float(margins.min()), margins, sol.status, sol.solver, sol.solve_time_s, info)


def _solve_lp(
    family, weights: np.ndarray, *, solver: str, threads: int, margin_gap: float, cost, margin_fraction: float,
    max_margin, progress: bool, device: str,
):
    """The robust LP of ``family`` by ``solver``."""
    from hardlinear.rules.robust_lp import solve_robust_lp

    if solver in (*LARGE_GRID_SOLVERS, *STRUCTURE_SOLVERS):  # margin_gap does not apply
        if solver in LARGE_GRID_SOLVERS and getattr(family, "polytope", None) is not None:
            raise ValueError(f"rule_solver={solver!r} works over an input box; over an input polytope use rule_solver='auto'")
        if cost is not None:
            raise ValueError(
                f"rule_solver={solver!r} solves the margin-only rule; use rule_objective='margin' with it, or "
                "rule_solver='auto' for the cost-aware rule"
            )
        if solver == "rank_one":
            from hardlinear.rules.rank_one import solve_rank_one

            return solve_rank_one(family, weights, threads=threads, progress=progress)
        if solver == "sparse":
            from hardlinear.rules.robust_lp_sparse import solve_robust_lp_sparse

            return solve_robust_lp_sparse(family, weights, threads=threads)
        from hardlinear.rules.reduced import solve_robust_lp_reduced

        return solve_robust_lp_reduced(family, weights, threads=threads, device=device)
    return solve_robust_lp(
        family, weights, solver, threads=threads, margin_gap=margin_gap, cost=cost,
        margin_fraction=margin_fraction, max_margin=max_margin, progress=progress,
    )


def _build_module(problem, sol, description: str) -> DecisionRule:
    compact = problem.compact
    quadratic = None
    linear = sol.F
    if problem.form == "standard":
        if compact.input_dependent_lhs:
            from hardlinear.rules.robust_sdp import slack_forms

            quadratic = slack_forms(compact, sol.F)
        else:
            linear = np.vstack([sol.F, np.asarray(compact.B_ineq - compact.H @ sol.F)])
    return DecisionRule(
        linear,
        quadratic,
        n_orig=compact.n,
        form=problem.form,
        t_star=sol.t_star,
        binding_row=sol.binding_row,
        binding_description=description,
        info=sol.info,
    )


def solve_decision_rule(
    problem,
    solver: str = "auto",
    cache_dir: str | os.PathLike | None = None,
    verbose: bool = False,
    *,
    require_positive_margin: bool = True,
    find_max_uncertainty: bool = True,
    margin: str = "e1",
    threads: int = 1,
    margin_gap: float = 0.0,
    rule_objective: str = "margin",
    margin_fraction: float = 0.5,
    max_margin: float | str | None = "auto",
    progress: bool = True,
    device: str = "cpu",
) -> DecisionRule:
    """Compute (or load from ``cache_dir``) the safe network of ``problem`` and verify it.

    ``solver``: "auto" (the fastest that applies by the cost model of :mod:`hardlinear.rules.solver_choice`, fitted
    to measurements; Clarabel for the SDP, the cost rule and input polytopes), "clarabel", "highs"
    (IPX), "pdlp" (HiGHS first-order), "sparse" (the whole LP in the grid's sparse variables,
    :mod:`~hardlinear.rules.robust_lp_sparse`: few inputs) or "reduced" (the structured interior point of
    :mod:`~hardlinear.rules.reduced`: many inputs) or "rank_one" (inputs that enter through one functional, e.g.
    the economic dispatch's total load: :mod:`~hardlinear.rules.rank_one`) for the LP, "clarabel" or "scs" for the SDP.
    ``margin``: the SDP's margin form (see :mod:`~hardlinear.rules.robust_sdp`; ignored by the LP).
    ``margin_gap``: the LP's relative optimality gap on ``t*`` at which the row generation may stop
    (:func:`~hardlinear.rules.robust_lp.solve_robust_lp`); 0, the default, solves to the last row. Ignored by the SDP.
    Raises :class:`DecisionRuleInfeasible` when ``t* <= 0``; with ``require_positive_margin=False`` a rule
    with ``t* > -WEAK_MARGIN`` is accepted with a warning (the paper's portfolio at uncertainty 0.4 sits
    exactly at ``t* = 0``: its rule is feasible only up to the solver's accuracy, ~1e-8).
    ``problem``: a :class:`~hardlinear.problems.base.Problem`, or constraints alone (a
    :class:`~hardlinear.problems.user.LinearConstraints` or a :class:`~hardlinear.constraints.family.ConstraintFamily`).
    ``rule_objective``: "margin" (the paper: maximise ``t``) or "cost" (beyond the paper: keep
    ``t >= margin_fraction * t*`` and minimise the rule's expected objective over the box; docs/cost_aware_rule.md).
    ``max_margin``: the cap on an unbounded margin (see :func:`~hardlinear.rules.robust_lp.solve_robust_lp`).
    ``progress``: log the rounds of a solve that runs longer than 2 s at INFO level (rows, rounds, elapsed).
    ``device``: where the "reduced" solver's Newton steps run ("cpu" or "cuda"; other solvers take "cpu" only).
    It is not part of the cache key: a rule is cached by what it is, and its verified ``t*`` is what counts.
    """
    from hardlinear.problems.user import as_rule_target

    problem = as_rule_target(problem)
    _rule_cost(problem, rule_objective)  # a bad objective option fails before any solving
    requested, solver = solver, _resolve_solver(problem, solver, rule_objective)
    check_rule_device(device, solver)
    # a cost-aware rule depends on the objective too: its cache key is the whole problem's fingerprint
    fingerprint = problem.constraints_fingerprint() if rule_objective == "margin" else problem.fingerprint()
    variant = _rule_variant(rule_objective, margin_fraction, max_margin)
    if rule_objective == "margin" and eliminate_free_slacks(problem.compact) is not None:
        variant += "-noslack"  # solved without its free slack columns (hardlinear.rules.free_slack): another rule
    path = _cache_path(cache_dir, problem, solver, margin, fingerprint, margin_gap, variant) if cache_dir is not None else None
    if path is not None:
        check_cache_path(path, cache_dir)  # before any solving: a solve whose rule cannot be kept is wasted
    rule = _load_cached(path, fingerprint) if path is not None else None
    if rule is not None:  # the checksum says the file is intact, not that the rule holds: re-verify it
        from hardlinear.rules.checks import reverify

        why = reverify(problem, rule)
        if why is not None:
            warnings.warn(f"decision-rule cache {path} does not verify ({why}); rebuilding it", stacklevel=2)
            rule = None
    if rule is None:
        from hardlinear.rules.progress import SolveProgress
        from hardlinear.rules.robust_lp import ProgramInfeasible
        from hardlinear.rules.robust_lp_sparse import SparseSolveFailed

        start = time.perf_counter()

        def run(name: str):
            with SolveProgress(name, problem.name):
                return _solve(
                    problem, name, margin, threads, margin_gap, rule_objective=rule_objective,
                    margin_fraction=margin_fraction, max_margin=max_margin, progress=progress, device=device,
                )

        try:
            try:
                sol = run(solver)
            except SparseSolveFailed as err:
                if requested != "auto":
                    raise
                # auto chose the sparse LP and HiGHS stopped without an optimum: the reduced solver takes the same LP
                log.warning("rule_solver=auto: %s; %s goes to the reduced solver instead", err, problem.name)
                solver = "reduced"
                path = _cache_path(cache_dir, problem, solver, margin, fingerprint, margin_gap, variant) if cache_dir is not None else None
                sol = run(solver)
        except ProgramInfeasible as err:
            raise _infeasible(problem, float("-inf"), str(err), solver, find_max_uncertainty, margin) from err
        description = describe_row(problem, sol.binding_row)
        sol.info.update(
            solver=solver,
            status=sol.status,
            solve_time_s=time.perf_counter() - start,
            fingerprint=fingerprint,
            formulation=FORMULATION_VERSION,
            problem=problem.name,
            form=problem.form,
            t_star=sol.t_star,
            rule_objective=rule_objective,
            peak_rss_mb=peak_rss_mb(),
        )
        rule = _build_module(problem, sol, description)
        _check_margin(problem, rule, solver, require_positive_margin, find_max_uncertainty, margin)
        if path is not None:
            _save_cached(path, rule)
        rule.info["cached"] = False
    else:
        _check_margin(problem, rule, solver, require_positive_margin, find_max_uncertainty, margin)
        rule.info["cached"] = True
    info = rule.info
    log.log(
        logging.INFO if verbose or not info["cached"] else logging.DEBUG,
        "decision rule %s (%s, %s%s): t*=%.6g at row %d [%s], status %s, %.2f s, %s",
        problem.name,
        problem.form,
        solver,
        ", cached" if info["cached"] else "",
        rule.t_star,
        rule.binding_row,
        rule.binding_description,
        info.get("status"),
        info.get("solve_time_s", float("nan")),
        _size_text(info),
    )
    return rule


def check_rule_device(device: str, solver: str) -> None:
    """A ValueError naming the fix, before any work, for a rule device the solver cannot use: "cpu" always
    works; another device (e.g. "cuda") needs ``solver="reduced"`` and a torch that sees that device
    (:func:`~hardlinear.rules.reduced.backend_device`)."""
    if device == "cpu":
        return
    if solver != "reduced":
        raise ValueError(
            f"rule device {device!r} applies to the 'reduced' rule solver only (got {solver!r}): set "
            "method.rule_solver=reduced, or method.rule_device=cpu"
        )
    from hardlinear.rules.reduced import backend_device

    backend_device(device)


def _check_margin(
    problem, rule: DecisionRule, solver: str, require_positive: bool, find_level: bool, margin: str
) -> None:
    t = rule.t_star
    if t > 0:
        return
    if not require_positive and t > -WEAK_MARGIN:
        warnings.warn(
            f"decision rule for {problem.name} ({problem.form}) has t* = {t:.2e}: feasible only up to the solver's "
            "accuracy, with no strict margin; the blend then keeps binding rows at their bounds",
            stacklevel=3,
        )
        return
    detail = f"binding row {rule.binding_row} [{rule.binding_description}]"
    raise _infeasible(problem, t, detail, solver, find_level, margin, rule)


def _infeasible(problem, t: float, detail: str, solver: str, find_level: bool, margin: str,
                rule: DecisionRule | None = None) -> DecisionRuleInfeasible:
    level = getattr(problem, "uncertainty", None)
    r_max = None
    build = rebuilder(problem) if find_level and level is not None else None
    how = "bisection, tol 1e-3"
    if build is not None:
        try:
            r_max = max_uncertainty_exact(problem, solver)
            if r_max is not None:
                how = "exact, one LP"
            else:
                r_max = max_uncertainty(build, lo=0.0, hi=float(level), solver=solver, margin=margin)
        except Exception as err:  # the message must still come out; say why the level is missing
            log.warning("could not find the largest uncertainty level of %s: %s", problem.name, err)
    where = f" at uncertainty {level:g}" if level is not None else ""
    if r_max is not None:
        hint = (
            f"The largest uncertainty level with a strictly feasible rule is {'about ' if how.startswith('b') else ''}"
            f"{r_max:.4f} ({how}); rebuild the problem with uncertainty below it."
        )
    elif not find_level:
        hint = "The largest feasible uncertainty level was not computed (find_max_uncertainty=False)."
    elif getattr(problem.compact, "polytope", None) is not None:
        hint = "The input set is a polytope: tighten it (b_in) around the inputs you need, or relax the binding row."
    elif level is None and (kappa := _box_scaling(problem, solver)) is not None:
        r_max = kappa
        hint = (
            f"A rule exists for the input box shrunk about its centre by any factor below {kappa:.4g} "
            "(lo' = mid - f (hi - lo) / 2, hi' = mid + f (hi - lo) / 2; exact, one LP)"
            + ("." if kappa > 0 else ": none, even at the centre alone: check the binding row.")
        )
    else:
        hint = "The largest feasible uncertainty level was not computed (the problem cannot be rebuilt at other levels)."
    diagnosis, point = _diagnosis(problem, rule)
    if point and r_max is None and hint.startswith("The largest feasible uncertainty level was not computed (the problem"):
        hint = ""  # the point without a solution says more than a level that cannot be computed
    msg = (
        f"no decision rule with a positive margin exists for {problem.name} ({problem.form}){where}: "
        f"t* = {t:.4g} ({detail}). {' '.join(part for part in (diagnosis, hint) if part)}"
        f"{'' if point == 'everywhere' else _fixes(problem, level, r_max)}"
    )
    return DecisionRuleInfeasible(msg, t_star=t, max_uncertainty=r_max)


def _diagnosis(problem, rule: DecisionRule | None) -> tuple[str, str]:
    """Whether the constraints themselves have no solution at some input (:mod:`hardlinear.rules.diagnosis`: the
    input, the rows in conflict) or are feasible at every point checked, so that only an affine rule is missing;
    ``(text, "" | "point" | "everywhere")``: none found, one found, and the centre of the input set has none either."""
    from hardlinear.rules.diagnosis import find_infeasible_point

    compact = problem.compact
    F = None if rule is None else rule.F.detach().cpu().double().numpy()
    try:
        found, checked = find_infeasible_point(compact, F, -1 if rule is None else rule.binding_row)
    except Exception as err:  # noqa: BLE001 - the infeasibility message must still come out
        log.warning("could not search %s's input set for an infeasible point: %s", problem.name, err)
        return "(The input set was not searched for an input without any solution.)", ""
    if checked == 0:
        return ("(The input set was not searched for an input without any solution: input-dependent left-hand side, "
                "or too large a problem.)"), ""
    where = "vertex of the input polytope" if getattr(compact, "polytope", None) is not None else "corner of the box"
    if found is None:
        return (f"The constraints have a solution at every point checked ({checked} {where.split(' of ')[0]}s of the input "
                "set, those that make each right-hand side smallest): the problem is feasible there, but no affine rule "
                "y = F (1, theta) keeps a positive margin over the whole input set."), ""
    theta = np.array2string(found.theta, precision=6, separator=", ", threshold=16)
    eq_names = getattr(problem, "eq_names", None)
    rows = [f"equality row {i}" + (f" ({eq_names[i]})" if eq_names and i < len(eq_names) else "") for i in found.eq_rows[:4]]
    rows += [describe_row(problem, i) for i in found.ineq_rows[:4]]
    more = len(found.eq_rows) + len(found.ineq_rows) - len(rows)
    conflict = f"in conflict there: {'; '.join(rows) or 'see the rows above'}{f' and {more} more' if more > 0 else ''}"
    if found.at_centre:
        return (f"The constraints themselves have no solution at the input theta = {theta} (a {where}), nor at the centre "
                f"of the input set: every y misses some row by at least {found.violation:.4g}; {conflict}. They "
                "contradict each other whatever the input: relax or correct those rows (no input set helps)."), "everywhere"
    return (
        f"The constraints themselves have no solution at the input theta = {theta} (a {where}): every y misses some "
        f"row by at least {found.violation:.4g}; {conflict}. No method can be feasible at that input: leave it out of "
        "the input set, or relax those rows."
    ), "point"


def _fixes(problem, level, r_max) -> str:
    """The fixes that exist, each with its exact argument."""
    polytope = getattr(problem.compact, "polytope", None) is not None
    user = type(problem).__name__ == "LinearConstraints"
    fixes = []
    if polytope:
        fixes.append("tighten the input polytope around the inputs that occur (b_in)")
    else:
        fixes.append("an input polytope holding only the inputs that occur (combinations of extremes that never happen "
                     "left out): " + ("LinearConstraints(..., A_in=A, b_in=b)" if user else
                                     "problem=linear with arrays A_in, b_in (A_in theta <= b_in)"))
    if level is not None and r_max is not None:
        fixes.append(f"a smaller uncertainty: problem.uncertainty={0.999 * r_max:.4g}")
    elif r_max is not None and r_max > 0:
        fixes.append(f"a smaller box: LinearConstraints(lo=mid - f * (hi - lo) / 2, hi=mid + f * (hi - lo) / 2, ...) "
                     f"with f < {r_max:.4g}" if user else f"a box shrunk about its centre by a factor below {r_max:.4g}")
    return (" Fixes: " + "; ".join(f"({i}) {fix}" for i, fix in enumerate(fixes, 1)) + ". The cost-aware rule "
            "(rule_objective='cost') is no fix: it keeps t >= margin_fraction * t* of this same margin.")


def _box_scaling(problem, solver: str) -> float | None:
    """The largest factor by which a jointly linear family's box may be scaled about its centre with a rule of
    positive margin still existing (None for the SDP, or where it cannot be computed)."""
    from hardlinear.rules.robust_lp import max_uncertainty_scaling

    if problem.compact.input_dependent_lhs or getattr(problem.compact, "polytope", None) is not None:
        return None
    try:
        return max_uncertainty_scaling(problem.compact, solver=solver)[0]
    except Exception as err:  # the infeasibility message must still come out
        log.warning("could not compute the largest feasible box of %s: %s", problem.name, err)
        return None


def rule_margin(problem, solver: str = "auto", margin: str = "e1") -> float:
    """The verified margin ``t*`` of ``problem``'s rule, ``-inf`` when its program is infeasible (no raise)."""
    from hardlinear.rules.robust_lp import ProgramInfeasible

    try:
        return _solve(problem, _resolve_solver(problem, solver), margin, 1).t_star
    except ProgramInfeasible:
        return float("-inf")


def max_uncertainty(
    build: Callable[[float], Any],
    lo: float = 0.0,
    hi: float = 1.0,
    tol: float = 1e-3,
    solver: str = "auto",
    margin: str = "e1",
) -> float:
    """Largest level ``r`` in ``[lo, hi]`` with ``t*(build(r)) > 0``, by bisection (``t*`` falls as the box
    grows). ``lo <= 0`` is taken as feasible without solving; a level that ``build`` rejects counts as
    infeasible. Returns ``hi`` if ``hi`` is feasible; ``lo`` if nothing above it is."""
    if not lo < hi:
        raise ValueError(f"need lo < hi; got lo={lo}, hi={hi}")
    if tol <= 0:
        raise ValueError(f"tol must be > 0; got {tol}")

    def feasible(r: float) -> bool:
        try:
            problem = build(r)
        except ValueError:
            return False
        return rule_margin(problem, solver, margin) > 0

    if lo > 0 and not feasible(lo):
        return lo
    if feasible(hi):
        return hi
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if feasible(mid) else (lo, mid)
    return lo


def max_uncertainty_exact(problem, solver: str = "auto", margin_gap: float = 0.0) -> float | None:
    """The supremum of the uncertainty levels at which ``problem`` has a rule with a positive margin, by one LP
    (:func:`hardlinear.rules.robust_lp.max_uncertainty_scaling`); ``None`` where that LP does not apply: an
    input-dependent left-hand side (the SDP), a problem that cannot be rebuilt at other levels, or one whose
    level does not scale the inputs' effect linearly around a fixed nominal (checked on a rebuild at half the
    level). Levels at or above the returned one have ``t* <= 0``; every level below it has ``t* > 0``. With
    ``margin_gap > 0`` the row generation may stop early: the level returned is then a certified lower bound
    within that relative gap of the supremum (see ``max_uncertainty_scaling``)."""
    from hardlinear.rules.robust_lp import box_transform, max_uncertainty_scaling

    level = getattr(problem, "uncertainty", None)
    if problem.compact.input_dependent_lhs or level is None:
        return None
    requested, solver = solver, _resolve_solver(problem, solver)
    if solver == "reduced" and requested == "auto":
        solver = _scaling_lp_solver(problem)  # the reduced solver has no scaling LP: the fastest that has one
    if solver in ("reduced", "rank_one"):
        return None  # no scaling LP of its own; the caller bisects with the same solver instead
    build = rebuilder(problem)
    if build is None:
        return None
    half = build(level / 2.0).compact
    full = problem.compact
    for B, B_half in ((full.B_eq, half.B_eq), (full.B_ineq, half.B_ineq)):
        Bu, Bu_half = B @ box_transform(full.box), B_half @ box_transform(half.box)
        scale = 1.0 + np.abs(Bu).max() if Bu.size else 1.0
        if not (np.allclose(Bu[:, 0], Bu_half[:, 0], atol=1e-12 * scale) and np.allclose(Bu[:, 1:], 2.0 * Bu_half[:, 1:], atol=1e-12 * scale)):
            return None
    if solver == "sparse":  # the same program, whole, in the grid's sparse variables
        from hardlinear.rules.robust_lp_sparse import max_uncertainty_scaling_sparse

        kappa, info = max_uncertainty_scaling_sparse(full)
    else:
        kappa, info = max_uncertainty_scaling(full, solver=solver, margin_gap=margin_gap)
    log.info("largest uncertainty level of %s: %.6g (kappa %.6g, %d rounds)", problem.name, kappa * level, kappa, info.get("rounds", 0))
    return kappa * level


def _scaling_lp_solver(problem) -> str:
    """The solver the cost model predicts fastest among those with a level-scaling LP (Clarabel, HiGHS, and the
    sparse one where it fits): what ``max_uncertainty_exact`` uses when ``auto`` would pick the reduced solver.
    "reduced" (so: bisect) when every one of them is beyond the sizes it was measured to finish."""
    from hardlinear.rules.robust_lp_sparse import SPARSE_MAX_NONZEROS
    from hardlinear.rules.solver_choice import choose, rule_features

    features = rule_features(problem)
    candidates = ("clarabel", "highs") + (("sparse",) if features["sparse_lp_nnz"] <= SPARSE_MAX_NONZEROS else ())
    solver, predicted = choose(features, candidates)
    return solver if math.isfinite(predicted[solver]) else "reduced"


def rebuilder(problem) -> Callable[[float], Any] | None:
    """``r -> problem at uncertainty r`` for DC-OPF, economic dispatch and portfolio problems, or None when ``problem`` cannot
    be reproduced from its attributes (checked by fingerprint at its own level)."""
    from hardlinear.problems import Portfolio, build_problem

    options: dict[str, Any] = {"form": problem.form, "objective": problem.objective_kind}
    if hasattr(problem, "rebuild"):  # a problem that says how (the economic dispatch)
        build = problem.rebuild
    elif hasattr(problem, "case"):
        if hasattr(problem, "susceptance"):
            options["susceptance"] = problem.susceptance
        if hasattr(problem, "inputs"):
            options["inputs"] = problem.inputs

        def build(r: float):
            return build_problem("dcopf", case=problem.case, uncertainty=r, **options)

    elif isinstance(problem, Portfolio):

        def build(r: float):
            return Portfolio(uncertainty=r, **options)

    else:
        return None
    try:
        same = build(problem.uncertainty).constraints_fingerprint() == problem.constraints_fingerprint()
    except Exception:  # a problem that cannot be rebuilt is not an error here
        return None
    return build if same else None


# --- describing rows --------------------------------------------------------------------------------------
def describe_row(problem, row: int) -> str:
    """A readable form of inequality row ``row`` (the compact row; in the standard form its slack)."""
    if row < 0:
        return "no inequality rows"
    compact = problem.compact
    H = compact.H_stack[0] if compact.input_dependent_lhs else sp.csr_matrix(compact.H)
    coeffs = np.asarray(H[row].todense()).ravel() if sp.issparse(H) else H[row]
    names = _variable_names(problem)
    terms = [f"{c:+.4g} {names[j]}" for j, c in enumerate(coeffs) if c != 0]
    rhs = compact.B_ineq[row, 0]
    text = " ".join(terms) + f" <= {rhs:.6g}" + (" + (input terms)" if np.any(compact.B_ineq[row, 1:]) else "")
    if compact.input_dependent_lhs:
        text += " (nominal left-hand side)"
    row_names = getattr(problem, "ineq_names", None)  # a problem file's optional names (problems.linear)
    named = f" ({row_names[row]})" if row_names and row < len(row_names) else ""
    return f"row {row}{named}: {text}"


def _variable_names(problem) -> list[str]:
    n = problem.compact.n
    given = getattr(problem, "variable_names", None)
    if given and len(given) == n:
        return list(given)
    names = [f"y[{j}]" for j in range(n)]
    slices = problem.variable_slices() if hasattr(problem, "variable_slices") else {}
    net = getattr(problem, "network", None)
    for label, sl in slices.items():
        for i, j in enumerate(range(*sl.indices(n))):
            names[j] = f"{label}[{i}]"
            if net is not None and label == "theta":
                names[j] = f"theta[bus {net.bus_ids[i]}]"
            elif net is not None and label == "pg":
                names[j] = f"pg[{i}] (bus {net.bus_ids[net.gen_bus[i]]})"
            elif net is not None and label == "pf":
                names[j] = f"pf[{i}] ({net.bus_ids[net.f_bus[i]]}-{net.bus_ids[net.t_bus[i]]})"
    return names


def _size_text(info: dict[str, Any]) -> str:
    keys = ("n_variables", "n_constraints", "nnz", "rounds", "rows_in_lp", "expressions", "psd_blocks")
    return " ".join(f"{k}={info[k]}" for k in keys if k in info)


def peak_rss_mb() -> float | None:
    """This process's own peak resident memory (MB) so far; None where the platform does not report it.

    Linux's ``VmHWM`` belongs to the process's address space; ``getrusage``'s ``ru_maxrss`` survives fork and
    exec, so a child started by a large parent reports the parent's peak (6.2 GB for the 14-bus rule when
    ``benchmarks/run_all.py`` had run the latency benchmark first). ``ru_maxrss`` only where there is no ``/proc``.
    """
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024.0, 1)
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KB on Linux, bytes on macOS
    return round(peak / (1024.0**2 if sys.platform == "darwin" else 1024.0), 1)


# --- cache ---------------------------------------------------------------------------------------------
def _rule_variant(rule_objective: str, margin_fraction: float, max_margin) -> str:
    """The cache tag of the rule's objective options ("" for the paper's margin rule with the default cap)."""
    tag = f"-cost{margin_fraction:g}" if rule_objective == "cost" else ""
    if max_margin != "auto":
        tag += f"-cap{max_margin}"
    return tag


def _cache_path(
    cache_dir, problem, solver: str, margin: str, fingerprint: str, margin_gap: float = 0.0, variant: str = ""
) -> Path:
    tag = solver if not problem.compact.input_dependent_lhs else f"{solver}-{margin}"
    if margin_gap and not problem.compact.input_dependent_lhs:  # a rule stopped at a gap is another rule
        tag += f"-gap{margin_gap:g}"
    tag += variant
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in problem.name)
    return Path(cache_dir) / "decision_rules" / f"{safe}-{problem.form}-{tag}-{FORMULATION_VERSION}-{fingerprint[:16]}.rule"


def check_cache_path(path: Path, cache_dir: str | os.PathLike) -> None:
    """``ValueError`` naming ``cache_dir`` and the fix when the rule's cache file ``path`` cannot be written there: a
    file where a folder goes, a folder where the file goes, a folder that cannot be created (``/proc``) or written.
    The folder is created when missing (the caller named it)."""
    fix = "give a writable folder, or cache_dir=None to keep the rule in memory only"
    if path.is_dir():
        raise ValueError(f"cache_dir={str(cache_dir)!r}: a folder sits where the rule's cache file goes ({path}); "
                         "remove it, or give another cache_dir")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"cache_dir={str(cache_dir)!r} cannot hold the rule cache ({type(err).__name__}: "
                         f"{err.strerror or err} at {err.filename or path.parent}); {fix}") from None
    if not os.access(path.parent, os.W_OK):
        raise ValueError(f"cache_dir={str(cache_dir)!r} cannot hold the rule cache ({path.parent} is not writable); {fix}")


def _save_cached(path: Path, rule: DecisionRule) -> None:
    """Atomic write (``hardlinear.runtime.atomic``) of ``MAGIC | sha256(payload) | payload``."""
    arrays = {"linear": rule.linear.detach().cpu().to(torch.float64).numpy()}
    if rule.quadratic is not None:
        arrays["quadratic"] = rule.quadratic.detach().cpu().to(torch.float64).numpy()
    meta = rule.get_extra_state()
    arrays["meta"] = np.array(json.dumps(meta))
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    payload = buf.getvalue()
    atomic_write_bytes(path, CACHE_MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)


def _load_cached(path: Path, fingerprint: str) -> DecisionRule | None:
    """The cached rule, or None (missing, or corrupt: reported in one line and rebuilt by the caller)."""
    if not path.exists():
        return None
    try:
        data = path.read_bytes()
        head = len(CACHE_MAGIC)
        if not data.startswith(CACHE_MAGIC) or len(data) < head + 65:
            raise ValueError("not a decision-rule cache file")
        digest, payload = data[head : head + 64].decode(), data[head + 65 :]
        if hashlib.sha256(payload).hexdigest() != digest:
            raise ValueError("checksum mismatch (truncated or edited)")
        with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
            meta = json.loads(str(npz["meta"]))
            quadratic = npz["quadratic"] if "quadratic" in npz.files else None
            rule = DecisionRule(npz["linear"], quadratic)
        rule.set_extra_state(meta)
        if rule.info.get("fingerprint") != fingerprint:
            raise ValueError("problem fingerprint differs")
        return rule
    except Exception as err:
        warnings.warn(f"decision-rule cache {path} is unusable ({err}); rebuilding it", stacklevel=3)
        return None
