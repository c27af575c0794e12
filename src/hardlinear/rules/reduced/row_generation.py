"""Row generation and the public entry points (step 2 of :mod:`hardlinear.rules.reduced`).

:func:`solve_robust_lp_reduced` eliminates the equalities (:mod:`~hardlinear.rules.reduced.elimination`), runs the
rounds (:func:`_rounds`) and verifies the rule it assembles (:mod:`~hardlinear.rules.reduced.certification`). The
rounds start from a seed (:func:`_seed_rule`, plus the rows of ``seed_rows``: :func:`solve_with_coarse_seed` passes
the working set of the same grid with aggregated inputs); each solves its working set (:func:`_working_set` and
the interior point of :mod:`~hardlinear.rules.reduced.interior_point`, or in the grid's variables by
:func:`solve_working_set_sparse`), adds the expressions the iterate's rule violates, and stops when there are none
or when the rule reaches the zero-spread bound (certified optimal). :func:`backend_device` checks the ``device``
before any work.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import scipy.sparse as sp

from hardlinear.constraints.family import JointlyLinearFamily
from hardlinear.rules.reduced.certification import (
    _best_offset,
    _polished,
    _proximal_share,
    verified_row_margins_chunked,
)
from hardlinear.rules.reduced.elimination import _assemble_sparse, _OffsetLP, reduce_sparse
from hardlinear.rules.reduced.interior_point import _Point, _WorkingSet, solve_working_set
from hardlinear.rules.reduced.settings import (
    CERTIFY_GAP,
    COARSE_SEED_MIN_INPUTS,
    POLISH_ROWS,
    POLISH_WINDOW,
    PROXIMAL_RESOLVES,
    PROXIMAL_SHARE,
    REGULARIZATION,
    SPARSE_LP_SOLVERS,
    SPARSE_STEP,
    WORKING_SET_STEP,
)
from hardlinear.rules.robust_lp import ROW_TOLERANCE, RuleSolution, _expression_margins, _Reduced

log = logging.getLogger(__name__)


def backend_device(device: Any = "cpu") -> Any:
    """The ``torch.device`` on which the Newton step's heavy kernels run, or None for the default path.

    ``"cpu"`` (the string; the default): CPU torch kernels on the numpy arrays' memory. Any other torch device,
    as a name ("cuda", "cuda:1") or a ``torch.device``, runs the torch backend of
    :class:`~hardlinear.rules.reduced.interior_point._NormalSolver` there; ``torch.device("cpu")`` runs that
    backend on the CPU (how the tests check it without a GPU). Raises
    ValueError, naming the fix, for a name torch does not know or a device it cannot use (no CUDA here,
    a CUDA index beyond the devices, no float64), before any work."""
    import torch

    if isinstance(device, str) and device == "cpu":
        return None
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"rule device {device!r} is not a torch device ({err}); use 'cpu' or 'cuda' (or 'cuda:N')") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"rule device {device!r} asked for, but this torch ({torch.__version__}) sees no CUDA device (built "
            "without CUDA, or no GPU visible): set method.rule_device=cpu, or run on a machine with a GPU"
        )
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"rule device {device!r}: torch sees {torch.cuda.device_count()} CUDA device(s); use cuda:0..")
    try:
        torch.zeros(1, dtype=torch.float64, device=dev)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"rule device {device!r} cannot hold float64 tensors ({err}); use 'cpu' or 'cuda'") from None
    return dev


def solve_robust_lp_reduced(
    family: JointlyLinearFamily,
    weights: np.ndarray,
    threads: int = 1,
    max_rounds: int = 30,
    regularization: float = REGULARIZATION,
    seed_rows: np.ndarray | None = None,
    device: Any = "cpu",
    working_sets: str = "structured",
    exact_optimum: bool = False,
) -> RuleSolution:
    """The robust LP of :func:`~hardlinear.rules.robust_lp.solve_robust_lp` by the structured interior point
    on a sparse elimination; same return type, ``solver = "reduced"``; ``t_star`` is the verified margin over
    every row (float64, chunked). ``seed_rows``: inequality rows to start the row generation with (e.g. the
    ``info["working_set_rows"]`` of the same constraints with aggregated inputs), beside the usual seed.
    ``device``: where the Newton step's heavy kernels run (:func:`backend_device`: "cpu", the default, or
    "cuda"); the elimination, the row generation and the verification stay on the CPU, in float64 everywhere.
    ``working_sets``: "structured" (the structured interior point) or "sparse" (:func:`solve_working_set_sparse`).
    Raises ``RuntimeError`` when the interior point fails and
    :class:`~hardlinear.rules.robust_lp.ProgramInfeasible` when ``G F = B_eq`` has no solution."""
    import torch

    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (family.m_ineq,) or np.any(weights <= 0):
        raise ValueError(f"weights must be ({family.m_ineq},) and positive")
    if working_sets not in ("structured", "sparse"):
        raise ValueError(f"working_sets must be 'structured' or 'sparse'; got {working_sets!r}")
    dev = backend_device(device)
    t0 = time.perf_counter()
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    # numpy's BLAS pool too: unbounded, its threads spin against each other on a loaded machine (a 207 x 207 LU
    # took 0.48 s instead of 2 ms at load 16 on 2 cores)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=max(1, threads)):
        try:
            sol = _solve(family, weights, threads, max_rounds, regularization, t0, seed_rows, working_sets, device=dev,
                         exact_optimum=exact_optimum)
            sol.info["device"] = "cpu" if dev is None else ("torch-cpu" if dev.type == "cpu" else str(dev))
            return sol
        finally:
            torch.set_num_threads(previous_threads)


def solve_with_coarse_seed(
    family: JointlyLinearFamily, coarse: JointlyLinearFamily | None, weights: np.ndarray, threads: int = 1,
    min_inputs: int = COARSE_SEED_MIN_INPUTS, device: Any = "cpu",
) -> RuleSolution:
    """:func:`solve_robust_lp_reduced` on ``family``, its row generation seeded with the final working set of
    the rule for ``coarse`` (the same rows with aggregated inputs, e.g. loads by area; skipped when None, not
    coarser, or ``family`` has fewer than ``min_inputs`` inputs, where the first round is cheap anyway).
    ``info["coarse_seed"]`` records the coarse solve (inputs, rows, time, margin)."""
    if coarse is None or coarse.k >= family.k or coarse.m_ineq != family.m_ineq or family.k < min_inputs:
        return solve_robust_lp_reduced(family, weights, threads=threads, device=device)
    t0 = time.perf_counter()
    pre = solve_robust_lp_reduced(coarse, weights, threads=threads, device=device)
    rows = np.asarray(pre.info.get("working_set_rows", []), dtype=int)
    sol = solve_robust_lp_reduced(family, weights, threads=threads, seed_rows=rows, device=device)
    sol.info["coarse_seed"] = {"inputs": int(coarse.k), "rows": int(len(rows)), "t_star": pre.t_star, "time_s": pre.solve_time_s}
    sol.solve_time_s = time.perf_counter() - t0
    return sol


def _solve(
    family: JointlyLinearFamily, weights: np.ndarray, threads: int, max_rounds: int, regularization: float, t0: float,
    seed_rows: np.ndarray | None = None, working_sets: str = "structured", device: Any = None, exact_optimum: bool = False,
) -> RuleSolution:
    """The body of :func:`solve_robust_lp_reduced`, inside its thread limits."""
    sr = reduce_sparse(family, weights)
    red = sr.red
    d, q, E = red.N.shape[1], red.C.shape[1], len(red.upper)
    info: dict[str, Any] = {
        "null_dim": d, "active_inputs": q, "expressions": E, "rounds": 0, "rows_in_lp": 0,
        "rule_unknowns": d * (q + 1), "rule_unknowns_full": family.n * (family.k + 1), "elimination": sr.method,
        "reduce_time_s": time.perf_counter() - t0,
    }
    W = np.zeros((d, q + 1))
    status = "determined"
    if E and d:
        W, S = _rounds(red, regularization, threads, max_rounds, info, seed_rows, working_sets, device=device,
                       exact_optimum=exact_optimum)
        info["working_set_rows"] = rows_of_expressions(red, S).tolist()
        status = "Solved"
    if sr.solve_normal is None:
        from hardlinear.rules.robust_lp import _assemble, _reproject

        F = _reproject(_assemble(red, W, family.B_eq), family.G, family.B_eq, red.pinv)
    else:
        F = _assemble_sparse(sr, W, family)
    margins = verified_row_margins_chunked(F, family.H, family.B_ineq, family.box, weights)
    info["eq_residual"] = float(np.abs(family.G @ F - family.B_eq).max() / (1.0 + np.abs(family.B_eq).max()))
    t_star = float(margins.min()) if margins.size else float("inf")
    return RuleSolution(F, t_star, margins, status, "reduced", time.perf_counter() - t0, info)


def _rounds(
    red: _Reduced, regularization: float, threads: int, max_rounds: int, info: dict[str, Any], seed_rows: np.ndarray | None = None,
    working_sets: str = "structured",
    device: Any = None,
    exact_optimum: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Row generation around :func:`~hardlinear.rules.reduced.interior_point.solve_working_set`; returns
    ``(W: (d, q + 1), the final working set)``.

    The first working set is :func:`~hardlinear.rules.robust_lp._seed`'s plus the expressions of ``seed_rows``
    (inequality rows, e.g. the final working set of the same grid with aggregated inputs). A round stops at
    its first iterate that violates rows outside the set (``PROBE_GAP``), or once the iterate's rule, its offset
    re-optimised over every expression (:func:`~hardlinear.rules.reduced.certification._best_offset`), reaches
    the zero-spread bound on ``t*`` (certified optimal); otherwise the last round, which finds no such row, runs to ``IPM_TOL``."""
    d, q, E = red.N.shape[1], red.C.shape[1], len(red.upper)
    tic = time.perf_counter()
    S, W_seed = _seed_rule(red)
    info["seed_time_s"] = time.perf_counter() - tic
    if seed_rows is not None and len(seed_rows):
        S = np.unique(np.concatenate([S, expressions_of_rows(red, seed_rows)]))
    info["seed_expressions"] = int(len(S))
    tolerance = lambda t: ROW_TOLERANCE * max(1.0, abs(t))  # noqa: E731
    # every spread is >= 0, so the margin with zero spreads bounds t* from above: a rule whose verified margin
    # over every expression reaches it is optimal, whatever the working set (then the rounds stop)
    tic = time.perf_counter()
    upper = _best_offset(red, np.zeros(E))
    info["zero_spread_bound_time_s"] = time.perf_counter() - tic
    t_upper = upper[1] if upper is not None else np.inf
    info["t_upper_zero_spread"] = float(t_upper)
    bound = t_upper - CERTIFY_GAP * max(abs(t_upper), 1e-12)

    def certify(W: np.ndarray, margins: np.ndarray, t: float) -> tuple[np.ndarray, float] | None:
        """``(rule, margin)`` when ``W`` (or ``W`` with its offset re-optimised on the expressions nearest to
        binding, once ``t`` is within ``POLISH_WINDOW`` of the bound) reaches the bound over every expression."""
        if not np.isfinite(t_upper):
            return None
        if margins.min() >= bound:  # the rule itself reaches the bound over every expression
            return W, float(margins.min())
        if t >= t_upper - POLISH_WINDOW * max(abs(t_upper), 1e-12):
            # the rule's spreads with the best offset on the expressions nearest to binding (an LP in d + 1
            # unknowns), then verified on every expression
            spread = np.abs(red.M @ W[:, 1:] + red.C).sum(axis=1) if q else np.zeros(E)
            near = np.argsort(margins)[: max(POLISH_ROWS, 4 * (d + 1))]
            best = _best_offset(red, spread, near)
            if best is not None:
                polished = W.copy()
                polished[:, 0] = best[0]
                margin = float(_expression_margins(red, polished).min())
                if margin >= bound:
                    return polished, margin
        return None

    # the least-squares rule with its best offset can already be optimal (then no interior-point step runs)
    seed_margins = _expression_margins(red, W_seed)
    info["seed_margin"] = float(seed_margins.min())
    log.debug(
        "reduced robust LP setup: seed %d expressions in %.1f s (least-squares rule's margin %.6g), zero-spread bound %.10g in %.1f s",
        len(S), info["seed_time_s"], info["seed_margin"], t_upper, info["zero_spread_bound_time_s"],
    )
    if seed_margins.min() >= bound:
        info.update(rounds=0, rows_in_lp=0, t_working_set=float(t_upper), ipm_iterations=0, certified="zero-spread bound (least-squares seed rule)")
        log.debug("reduced robust LP: the least-squares seed rule's margin %.10g reaches the zero-spread bound %.10g", seed_margins.min(), t_upper)
        return W_seed, S
    if sparse_working_set(red, working_sets):
        return _rounds_sparse(red, S, regularization, threads, max_rounds, info, certify)
    ipm_total = 0
    for rounds in range(1, max_rounds + 1):
        ws, basis = _working_set(red, S)
        t_round = time.perf_counter()
        found: dict[str, np.ndarray] = {}

        def probe(x: _Point, t: float, S=S, found=found, basis=basis) -> bool:
            W = _full_rule(x, basis, q)
            margins = _expression_margins(red, W)
            below = np.flatnonzero(margins < t - tolerance(t))
            fresh = below[~np.isin(below, S)]
            if fresh.size:
                found["fresh"], found["margins"] = fresh, margins
                return True
            done = certify(W, margins, t)
            if done is not None:
                found["certified"], found["margin"] = done
                return True
            return False

        x, t_ws, ipm = solve_working_set(ws, regularization, threads, probe=probe, device=device)
        ipm_total += ipm["ipm_iterations"]
        for key in ("block_solves", "regularised_steps"):
            info[key] = info.get(key, 0) + ipm.get(key, 0)
        for key, value in ipm.get("timers_s", {}).items():
            info.setdefault("timers_s", {})[key] = info.get("timers_s", {}).get(key, 0.0) + value
        W = _full_rule(x, basis, q)
        if "certified" in found:
            info.update(rounds=rounds, rows_in_lp=int(len(S)), t_working_set=float(t_upper), ipm_iterations=ipm_total)
            info.update(ipm_gap=float(ipm["gap"]), ipm_stalled=False, certified="zero-spread bound")
            log.debug(
                "reduced robust LP round %d: %d of %d expressions, margin %.10g certified optimal (zero-spread bound "
                "%.10g) after %d steps, %.1f s", rounds, len(S), E, found["margin"], t_upper, ipm["ipm_iterations"],
                time.perf_counter() - t_round,
            )
            return found["certified"], S
        if ipm.get("probed"):
            fresh, margins = found["fresh"], found["margins"]
        else:
            info["ipm_gap"] = float(ipm["gap"])  # the final working set's optimum is within this
            info["ipm_stalled"] = bool(ipm.get("stalled", False))
            margins = _expression_margins(red, W)
            below = np.flatnonzero(margins < t_ws - tolerance(t_ws))
            fresh = below[~np.isin(below, S)]
        info.update(rounds=rounds, rows_in_lp=int(len(S)), t_working_set=float(t_ws), ipm_iterations=ipm_total)
        log.debug(
            "reduced robust LP round %d: %d of %d expressions, t=%.8g, rule's margin %.6g, %d rows below, %d steps%s, %.1f s",
            rounds, len(S), E, t_ws, float(margins.min()), len(fresh), ipm["ipm_iterations"],
            " (stopped early)" if ipm.get("probed") else "", time.perf_counter() - t_round,
        )
        if fresh.size == 0:
            share = _proximal_share(x, ipm["eps"], t_ws)
            info["proximal_share"] = share
            resolves = info.get("proximal_resolves", 0)
            if share > PROXIMAL_SHARE and exact_optimum and resolves < PROXIMAL_RESOLVES:
                # the regularised optimum trades margin for a smaller rule: solve this working set again with eps
                # small enough that the term weighs PROXIMAL_SHARE of t at this rule's size
                info["proximal_resolves"] = resolves + 1
                log.info(
                    "reduced robust LP round %d: proximal term %.2g of t=%.6g; re-solving with eps %.2g -> %.2g",
                    rounds, share, t_ws, regularization, regularization * PROXIMAL_SHARE / share,
                )
                regularization *= PROXIMAL_SHARE / share
                continue
            if share > PROXIMAL_SHARE:
                log.warning(
                    "reduced robust LP: the proximal term (eps/2)||W||^2 is %.2g of t = %.6g after %d re-solves, so the "
                    "rule's margin may be below the LP's optimum (at case9241_pegase a share of 0.082 cost 2.3 %%); "
                    "rule_solver=sparse solves the LP exactly where it fits, and exact_optimum=True re-solves with eps "
                    "shrunk (slow)", share, t_ws, resolves,
                )
            return _polished(red, W, margins), S
        S = np.concatenate([S, fresh[np.argsort(margins[fresh])][: max(50, min(d, WORKING_SET_STEP))]])
    raise RuntimeError(f"row generation did not converge in {max_rounds} rounds")


def sparse_working_set(red: _Reduced, working_sets: str) -> bool:
    """Whether :func:`_rounds` solves its working sets in the grid's variables (:func:`solve_working_set_sparse`,
    ``working_sets="sparse"``, needs the sparse elimination) rather than by the structured interior point
    (``"structured"``, the default). Measured (one thread, load 4-5): case6470_rte with one area input, 33-37 s in
    all against 23 s structured; case9241_pegase with 24 zones, HiGHS's first round (520 expressions) 25 s
    against 16 s, its rule violating 8,206 rows outside the set (the structured rule: 672), and its second
    (2,520 expressions) not done after 5 min; Clarabel 117 s on the first, NumericalError on the second. Kept as
    an option: its cost does not grow with ``d``."""
    if working_sets not in ("structured", "sparse"):
        raise ValueError(f"working_sets must be 'structured' or 'sparse'; got {working_sets!r}")
    if working_sets == "sparse" and getattr(red, "offset_lp", None) is None:
        raise ValueError("working_sets='sparse' needs the sparse elimination (G with independent rows)")
    return working_sets == "sparse"


def _rounds_sparse(red: _Reduced, S: np.ndarray, regularization: float, threads: int, max_rounds: int, info: dict[str, Any], certify) -> tuple[np.ndarray, np.ndarray]:
    """The rounds of :func:`_rounds` with every working set solved to optimality in the grid's variables
    (:func:`solve_working_set_sparse`); each round adds up to ``SPARSE_STEP`` of the most violated expressions."""
    tolerance = lambda t: ROW_TOLERANCE * max(1.0, abs(t))  # noqa: E731
    info["working_set_solver"] = "sparse"
    for rounds in range(1, max_rounds + 1):
        W, t_ws, lp_info = solve_working_set_sparse(red, S, regularization, threads)
        info["sparse_lp_time_s"] = info.get("sparse_lp_time_s", 0.0) + lp_info["time_s"]
        info.setdefault("sparse_lp_status", []).append(lp_info["status"])
        margins = _expression_margins(red, W)
        info.update(rounds=rounds, rows_in_lp=int(len(S)), t_working_set=float(t_ws), ipm_iterations=0)
        done = certify(W, margins, t_ws)
        if done is not None:
            info["certified"] = "zero-spread bound"
            log.debug("reduced robust LP (sparse) round %d: %d expressions, margin %.10g certified, %.1f s", rounds, len(S), done[1], lp_info["time_s"])
            return done[0], S
        below = np.flatnonzero(margins < t_ws - tolerance(t_ws))
        fresh = below[~np.isin(below, S)]
        log.debug(
            "reduced robust LP (sparse) round %d: %d of %d expressions, t=%.10g, rule's margin %.6g, %d rows below, %.1f s (%d variables)",
            rounds, len(S), len(red.w), t_ws, float(margins.min()), len(fresh), lp_info["time_s"], lp_info["variables"],
        )
        if fresh.size == 0:
            return _polished(red, W, margins), S
        S = np.concatenate([S, fresh[np.argsort(margins[fresh])][:SPARSE_STEP]])
    raise RuntimeError(f"row generation did not converge in {max_rounds} rounds")


def _working_set(red: _Reduced, S: np.ndarray) -> tuple[_WorkingSet, np.ndarray | None]:
    """The working-set LP of the expressions ``S``, and the basis it is written in.

    Only ``M_S W_j`` enters the working set's LP, and the proximal term ``(eps/2) ||W||^2`` makes every
    component of ``W_j`` in the null space of ``M_S`` zero: with ``|S| < d`` the LP is written in
    ``W_j = Q Z_j`` for an orthonormal basis ``Q: (d, |S|)`` of the rows' span (``M_S' = Q R``, so ``M_S Q = R'``),
    the same LP and the same minimiser with ``|S|`` instead of ``d`` unknowns per column (its blocks are
    ``|S| x |S|``: at case13659_pegase ``d = 4,091``). Returns ``(ws, Q)``, ``Q`` None when ``|S| >= d``."""
    M = red.M[S]
    basis = None
    if len(S) < M.shape[1]:
        basis, R = np.linalg.qr(M.T)
        M = np.ascontiguousarray(R.T)
    return _WorkingSet(M, red.C[S], red.R_up[S], red.R_lo[S], red.w[S], red.lower[S] >= 0), basis


def _full_rule(x: _Point, basis: np.ndarray | None, q: int) -> np.ndarray:
    """``W: (d, q + 1)`` of an iterate of the working-set LP written in ``basis`` (:func:`_working_set`)."""
    W = np.column_stack([x.W0, x.W.T]) if q else x.W0[:, None]
    return W if basis is None else basis @ W


def solve_working_set_sparse(red: _Reduced, S: np.ndarray, regularization: float, threads: int) -> tuple[np.ndarray, float, dict[str, Any]]:
    """The working-set LP in the grid's own variables, by Clarabel: ``(W: (d, q + 1), t, info)``.

    The rule's columns ``y_j = F_p,j + N W_j`` (``j = 0..q``, u-coordinates) are the unknowns, with
    ``G y_j = B_eq,j``; an expression's input coefficients are ``a_ej = H_e y_j - B_e,j`` (``= M_e W_j + C_ej``),
    ``|a_ej| <= V+_ej + V-_ej``, and its rows ``+-H_e y_0 + spread_e + w_e t <= b_e``. Every row is as sparse as
    the grid (no ``N``, no ``M``), so a working set larger than ``d`` costs what its rows' nonzeros cost, where the
    structured interior point's blocks are ``d x d`` per input (``d = 4,091`` at case13659_pegase). The proximal
    term ``(eps/2) ||y_j||^2`` has the minimiser of ``(eps/2) ||W_j||^2`` (``y_j - F_p,j`` is orthogonal to the
    min-norm ``F_p,j``); ``W = N' (y - F_p)``."""
    from hardlinear.rules.robust_lp import _solve_clarabel, _solve_highs

    lp_data: _OffsetLP = red.offset_lp
    G = lp_data.G
    m, n = G.shape
    q = red.C.shape[1]
    E = len(S)
    two = red.lower[S] >= 0
    Hs = lp_data.H_upper[S]
    ny = n * (q + 1)
    nv = ny + 2 * E * q + E + 1
    blocks = sp.block_diag([G] * (q + 1), format="csr")
    eq_G = sp.hstack([blocks, sp.csr_matrix((m * (q + 1), nv - ny))])
    IEq = sp.identity(E * q, format="csr")
    abs_rows = sp.hstack([sp.csr_matrix((E * q, n)), sp.block_diag([Hs] * q, format="csr"), -IEq, IEq, sp.csr_matrix((E * q, E + 1))]) if q else sp.csr_matrix((0, nv))
    summ = sp.kron(np.ones((1, q)), sp.identity(E, format="csr"))
    spread_rows = sp.hstack([sp.csr_matrix((E, ny)), -summ, -summ, sp.identity(E), sp.csr_matrix((E, 1))])
    Aeq = sp.vstack([eq_G, abs_rows, spread_rows]).tocsr()
    beq = np.concatenate([lp_data.b_eq0, lp_data.B_eq_active.T.reshape(-1), lp_data.B_up_active[S].T.reshape(-1), np.zeros(E)])
    gap = sp.csr_matrix((E, ny - n + 2 * E * q))
    w = red.w[S]
    Ain = sp.vstack([
        sp.hstack([Hs, gap, sp.identity(E), sp.csr_matrix(w[:, None])]),
        sp.hstack([-Hs[two], gap[two], sp.identity(E, format="csr")[two], sp.csr_matrix(w[two][:, None])]),
    ]).tocsr()
    bin_ = np.concatenate([lp_data.b_up[S], lp_data.b_lo[S][two]])
    scale = max(1.0, float(np.abs(beq).max(initial=0)), float(np.abs(bin_).max(initial=0)))
    lp = {"Aeq": Aeq, "beq": beq, "Ain": Ain, "bin": bin_, "nonneg": np.arange(ny, ny + 2 * E * q), "nv": nv, "nW": ny, "t": nv - 1}
    tic = time.perf_counter()
    failures = []
    for solver in SPARSE_LP_SOLVERS:
        try:
            if solver == "clarabel":
                z, status = _solve_clarabel(lp, regularization * scale, threads)
            else:  # interior point without crossover: no proximal term, any optimal rule
                z, status = _solve_highs(lp, threads, "ipx")
            break
        except RuntimeError as err:  # e.g. Clarabel's NumericalError at case9241_pegase, 1,179 expressions
            failures.append(f"{solver}: {err}")
            log.warning("sparse working-set LP (%d expressions): %s; trying the next solver", E, err)
    else:
        raise RuntimeError("every solver failed on the sparse working-set LP: " + "; ".join(failures))
    Y = z[:ny].reshape(q + 1, n).T  # (n, q + 1)
    cols = np.concatenate([[0], red.active])
    W = red.N.T @ (Y - red.Fp[:, cols])
    return W, float(z[nv - 1]), {"status": f"{solver}: {status}", "failures": failures, "time_s": time.perf_counter() - tic, "variables": nv, "nnz": int(Aeq.nnz + Ain.nnz)}


def _least_squares_rule(red: _Reduced, chunk_rows: int = 8192) -> np.ndarray:
    """``W: (d, q + 1)``: the columns ``W_j`` minimising ``sum_e (M_e W_j + C_ej)^2 / w_e^2`` (the spreads in least
    squares), by the normal equations accumulated over chunks of expressions with a ``1e-12`` relative ridge (the
    minimum-norm solution where ``M`` is rank-deficient, up to that ridge); ``W_0 = 0``. ``O(d^2)`` memory where
    :func:`numpy.linalg.lstsq` (an SVD of the weighted ``M``) needs copies of ``M`` and its time (at case9241_pegase
    ``E = 31,701``, ``d = 1,444``)."""
    E, d = red.M.shape
    q = red.C.shape[1]
    W = np.zeros((d, q + 1))
    if not q or not d:
        return W
    gram, rhs = np.zeros((d, d)), np.zeros((d, q))
    for s in range(0, E, chunk_rows):
        Mw = red.M[s : s + chunk_rows] / red.w[s : s + chunk_rows, None]
        gram += Mw.T @ Mw
        rhs += Mw.T @ (red.C[s : s + chunk_rows] / red.w[s : s + chunk_rows, None])
    ridge = 1e-12 * max(float(np.trace(gram)) / d, 1e-300)
    gram[np.diag_indices(d)] += ridge
    from scipy.linalg import cho_factor, cho_solve

    W[:, 1:] = -cho_solve(cho_factor(gram, check_finite=False), rhs, check_finite=False)
    return W


def _seed_rule(red: _Reduced, n_range: int = 20, n_ls: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """``(expressions, W)``: the seed of :func:`~hardlinear.rules.robust_lp._seed` (the ``n_range`` smallest
    half-ranges and the ``max(n_ls, d)`` worst expressions of the least-squares rule with its best offset) in
    ``O(E d)`` memory, and that rule (checked against the zero-spread bound before any interior-point step)."""
    E, d = red.M.shape
    halfrange = np.where(red.lower >= 0, (red.R_up + red.R_lo) / 2, red.R_up) / red.w
    W = _least_squares_rule(red)
    spread = np.abs(red.M @ W[:, 1:] + red.C).sum(axis=1) if red.C.shape[1] else np.zeros(E)
    best = _best_offset(red, spread)
    if best is not None:
        W[:, 0] = best[0]
    margins = _expression_margins(red, W)
    seed = np.concatenate([np.argsort(halfrange)[:n_range], np.argsort(margins)[: max(n_ls, min(d, WORKING_SET_STEP))]])
    return np.unique(seed), W


def expressions_of_rows(red: _Reduced, rows: np.ndarray) -> np.ndarray:
    """The expressions (positions in ``red.upper``) that hold the given inequality rows (upper or lower)."""
    m = int(max(red.upper.max(initial=-1), red.lower.max(initial=-1))) + 1
    owner = np.full(m, -1)
    owner[red.upper] = np.arange(len(red.upper))
    two = red.lower >= 0
    owner[red.lower[two]] = np.flatnonzero(two)
    rows = np.asarray(rows, dtype=int)
    rows = rows[(rows >= 0) & (rows < m)]
    found = owner[rows]
    return np.unique(found[found >= 0])


def rows_of_expressions(red: _Reduced, S: np.ndarray) -> np.ndarray:
    """The inequality rows (upper and, where there is one, lower) of the expressions ``S``."""
    lower = red.lower[S]
    return np.unique(np.concatenate([red.upper[S], lower[lower >= 0]]))
