"""Checks of a solved decision rule beyond its solve: margins against the rounding of a low-precision output,
and a rule loaded from the cache re-verified against the problem.

Why a float32 output needs a margin. The layer returns the rule's output ``y = F x`` wherever ``alpha = 1`` and
blends towards it elsewhere, then rounds once to the output dtype. Rounding changes each entry by at most
``u |y_j|`` (``u``: the unit roundoff, ``2^-24`` in float32), so row ``i`` of ``H y <= h``, evaluated exactly,
moves by at most ``u |H_i| |y|``; a reader who evaluates the row in that dtype also rounds ``h_i`` (``u |h_i|``).
The rule's slack on row ``i`` is at least ``t* w_i`` (``t*``: the verified margin, ``w_i``: the row's weight in
the robust program), so the rounded output stays feasible when

    t* w_i  >  (u_out + eps_64) max_{xi in box} (|H_i(x)| |F x| + |h_i(x)|)        for every row i

(``eps_64`` covers the float64 evaluation of ``F x`` and of the row). Rows moved by the blend are pushed further,
to the layer's own guard; this bound is about the rule itself, the output wherever ``alpha`` reaches 1. The
maxima are taken in closed form over the box (``|F x|`` entry by entry; an input-dependent ``H(x)`` through
``|H_0| + sum_j max|xi_j| |H_j|``), so the check is an upper bound, computed in float64 on the compact form
(the original variables: in the standard form a rounded output would otherwise hide the miss in its slack
equalities). case89_pegase at its largest uncertainty level has ``t* = 3.9e-8``: its float32 outputs violated
``H y <= h`` by 6.9e-7 at ``alpha = 1``; :func:`output_dtype_for` keeps such a method in float64.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
import torch

# A cached rule's recomputed margin must match its stored t* to this relative accuracy (the same float64
# closed form on the same coefficients: equal up to the order of summation).
REVERIFY_RTOL = 1e-9
EQ_TOL = 1e-9


def _weights(problem) -> np.ndarray:
    compact = problem.compact
    if compact.input_dependent_lhs:
        from hardlinear.rules.robust_sdp import sdp_row_weights

        return sdp_row_weights(compact, problem.form)
    from hardlinear.rules.robust_lp import row_weights

    return row_weights(compact.H, problem.form)


def _abs_max_over_box(M: np.ndarray, box) -> np.ndarray:
    """Per row of ``M: (r, k + 1)``: ``max_{xi in box} |M x|`` with ``x = (1, xi)``."""
    centre = M[:, 0] + M[:, 1:] @ box.mid
    return np.abs(centre) + np.abs(M[:, 1:]) @ box.radius


def rounding_scale(problem, F: np.ndarray) -> np.ndarray:
    """``(m_ineq,)``: ``max_{xi in box} (|H_i(x)| |F x| + |h_i(x)|)`` on the compact form, float64 (an upper bound)."""
    compact = problem.compact
    box = compact.box
    y_max = _abs_max_over_box(F, box)
    h_max = _abs_max_over_box(np.asarray(compact.B_ineq, dtype=np.float64), box)
    if compact.input_dependent_lhs:
        stack = np.abs(np.asarray(compact.H_stack, dtype=np.float64))  # (k + 1, m, n)
        x_max = np.concatenate([[1.0], np.maximum(np.abs(box.lo), np.abs(box.hi))])
        H_abs = np.tensordot(x_max, stack, axes=1)
    else:
        H_abs = abs(sp.csr_matrix(compact.H))
    return np.asarray(H_abs @ y_max).ravel() + h_max


def rounding_shortfall(problem, rule, dtype: torch.dtype) -> tuple[float, int]:
    """``(ratio, row)``: the largest ``(u_out + eps_64) scale_i / (t* w_i)`` over the rows (module docstring)
    and its row; a ratio ``>= 1`` means outputs rounded to ``dtype`` can violate that row."""
    if problem.compact.m_ineq == 0:
        return 0.0, -1
    unit = 0.5 * torch.finfo(dtype).eps + torch.finfo(torch.float64).eps
    need = unit * rounding_scale(problem, rule.F.detach().cpu().double().numpy())
    have = float(rule.t_star) * _weights(problem)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(have > 0, need / np.where(have > 0, have, 1.0), np.inf)
    row = int(np.argmax(ratio))
    return float(ratio[row]), row


def output_dtype_for(problem, rule, dtype: torch.dtype, method: str) -> torch.dtype:
    """``dtype``, or float64 (with a warning naming the margin and the bound) when the rule's margin is below
    the rounding of ``dtype`` on some row: outputs rounded to ``dtype`` would not be guaranteed feasible."""
    if dtype == torch.float64 or not dtype.is_floating_point:
        return dtype
    ratio, row = rounding_shortfall(problem, rule, dtype)
    if ratio < 1.0:
        return dtype
    warnings.warn(
        f"{method} on {problem.name} ({problem.form}): the decision rule's margin t* = {rule.t_star:.3g} is below "
        f"the {str(dtype).removeprefix('torch.')} rounding of its outputs on row {row} ({ratio:.3g} times the "
        "margin; see hardlinear.rules.checks): running the layer in float64 instead, so that its outputs "
        "stay feasible",
        stacklevel=3,
    )
    return torch.float64


class RuleDoesNotVerify(ValueError):
    """A given rule (a checkpoint's) that does not hold for the problem it is given with."""


def check_given_rule(problem, rule, min_margin: float = 0.0) -> None:
    """Use a rule computed elsewhere (a checkpoint's) only if it holds: :func:`reverify` recomputes its equality
    residual and its worst margin over the input set in float64 (the closed form over the box, the certified LP
    bound over a polytope; sampled for the SDP's input-dependent rows, as for a cached rule), and the margin must
    exceed ``min_margin`` (0; ``-WEAK_MARGIN`` where a zero margin was accepted when it was solved).
    :class:`RuleDoesNotVerify` says which check failed. Costs one pass over the rows: no program is solved."""
    why = reverify(problem, rule)
    if why is None and not rule.t_star > min_margin:
        why = f"its margin t* = {rule.t_star:.3g} is not above {min_margin:g}"
    if why is not None:
        raise RuleDoesNotVerify(f"the given decision rule does not hold for {problem.name} ({problem.form}): {why}")


def reverify(problem, rule) -> str | None:
    """Why ``rule`` (loaded from the cache) does not hold for ``problem``, or None when it does.

    Recomputes what the solve verified, in float64: the equality residual, the standard form's slack rows, and
    the worst margin over the box (closed form for the robust LP, equal to the stored ``t*``; sampled for the
    SDP, whose certificate is not stored: the sampled margin can only exceed a true ``t*``).
    """
    compact = problem.compact
    F = rule.F.detach().cpu().double().numpy()
    if F.shape != (compact.n, compact.k + 1):
        return f"its rule has shape {F.shape}, the problem needs {(compact.n, compact.k + 1)}"
    t_star = float(rule.t_star)
    weights = _weights(problem) if compact.m_ineq else np.ones(0)
    if compact.input_dependent_lhs:
        from hardlinear.rules.robust_sdp import equality_residual, sampled_row_margins, slack_forms

        eq = equality_residual(compact, F)
        worst = float(sampled_row_margins(compact, F, weights, 1024).min()) if compact.m_ineq else np.inf
        if rule.quadratic is not None:
            Q = rule.quadratic.detach().cpu().double().numpy()
            if not np.allclose(Q, slack_forms(compact, F), rtol=1e-12, atol=1e-12 * (1.0 + np.abs(Q).max())):
                return "its slack forms are not those of its rule"
        if worst < t_star - REVERIFY_RTOL * max(1.0, abs(t_star)):
            return f"its sampled worst margin {worst:.6g} is below its stored t* = {t_star:.6g}"
    else:
        from hardlinear.rules.robust_lp import verified_row_margins

        G, B_eq = sp.csr_matrix(compact.G), np.asarray(compact.B_eq, dtype=np.float64)
        eq = float(np.abs(G @ F - B_eq).max() / (1.0 + np.abs(B_eq).max())) if compact.m_eq else 0.0
        if compact.m_ineq:
            worst = float(verified_row_margins(F, compact.H, compact.B_ineq, compact.box, weights, getattr(compact, "polytope", None)).min())
            if not abs(worst - t_star) <= REVERIFY_RTOL * max(1.0, abs(t_star)):
                return f"its recomputed worst margin {worst:.6g} differs from its stored t* = {t_star:.6g}"
        if problem.form == "standard" and rule.linear.shape[0] > compact.n:
            S = rule.linear[compact.n :].detach().cpu().double().numpy()
            want = np.asarray(compact.B_ineq - compact.H @ F)
            if not np.allclose(S, want, rtol=0.0, atol=1e-12 * (1.0 + np.abs(want).max())):
                return "its slack rows are not B_ineq - H F"
    if not eq <= EQ_TOL:
        return f"its equality residual {eq:.2e} exceeds {EQ_TOL:g}"
    return None
