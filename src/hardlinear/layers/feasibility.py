"""The feasibility layer: project the task output onto the equalities, then blend it with a safe output.

The paper's section 3 (DESIGN.md section 2). For a task output ``y_task`` and a safe output ``y_SN`` (feasible
for every input in the box, e.g. a decision rule):

    y_TN  = P_eq(y_task)                                     (equality projection)
    s_TN  = h - H y_TN,   s_SN = h - H y_SN                  (slacks; >= 0 is feasible)
    alpha = max_{i : s_TN_i < 0} -s_TN_i / (s_SN_i - s_TN_i), clipped to [0, 1]   (0 if nothing is violated)
    y     = (1 - alpha) y_TN + alpha y_SN

Rounding. The blend puts the most violated row exactly on its bound, so rounding alone can cross it. The
equality projection, the slacks, ``alpha`` and the blend are computed in ``work = promote(alpha_dtype,
dtype(y_task))`` (float64 by default) and the result is rounded once to the input's dtype. With ``rounding_guard = c > 0``, whenever the
blend has to move, every row is pushed to a slack of at least (per instance)

    tau = c (eps_out + eps_work) (max_i ||H_i||_1 (||y_TN||_inf + ||y_SN||_inf) + ||h||_inf)

instead of 0. That covers the error of ``alpha`` (relative ``eps_work``, times the slack range
``|H_i| (|y_TN| + |y_SN|)``: the term that matters for huge task outputs even in float64) and of the final
rounding (``eps_out |H_i| |y|``); it costs nothing measurable (float64: ~1e-15 of the output's size; float32:
~5e-7). Guarantee, for inputs in the box and a safe output with ``s_SN >= tau`` on the rows it must rescue
(the rule's margin t* is orders of magnitude above tau):

* inequalities: the output, evaluated in float64, satisfies ``H y - h <= 0`` up to the rounding of that
  evaluation itself (~1e-16 of ``|H||y| + |h|``), whether the layer runs in float32 or float64; if the
  projected task output is already feasible, ``alpha = 0`` and the output *is* that projection, bit for bit;
* equalities: exact up to the rounding of the projection and of the output, per row about
  ``c' eps_out (||G_i||_1 ||y||_inf + |g_i|)``: in float32 ``c' <= 16`` (tested). In float64 no per-row
  constant holds in general: the projection's basis comes from an SVD, backward stable in norm only
  (``||G N|| ~ p(n) eps ||G||_2``), so row ``i``'s residual is about ``eps ||G||_2 ||y||_2`` and ``c'`` can
  reach ``~sqrt(n) ||G||_2 / ||G_i||_1``: measured 30.5 on dcopf_200 (docs/reliability.md) and ~183 on
  case89_pegase (issue 21's independent attack), still ~1e-14 relative; ~1e-6 relative in float32 (float32
  cannot do better; report metrics from a float64 layer);
* a task row with a non-finite entry (NaN, inf, or a row whose sum overflows), or whose slacks ``h - H y_TN``
  or their row sum overflow (a finite ``y_TN`` near the float range with an input-dependent ``H``), gets
  ``alpha = 1``: the output is the safe output, counted in ``nonfinite``, and no NaN reaches the output or
  the gradient.

Gradients: ``gradient="argmax"`` (the paper) differentiates the max through its arg-max row only;
``gradient="ste"`` keeps the exact max in the forward pass and back-propagates the gradient of
``T logsumexp(ratio / T)`` over the violated rows, whose gradient is the softmax of the ratios (it sums to one
like the max's one-hot gradient, spread over the rows that nearly bind); ``T = ste_temperature``.
"""

from __future__ import annotations

import warnings
from itertools import chain
from typing import Any

import numpy as np
import torch
from torch import nn

from hardlinear.constraints.family import (
    DENSE_LIMIT,
    ConstraintFamily,
    InputBox,
    InputDependentFamily,
    lift,
    sparse_coo,
)
from hardlinear.constraints.signed_rows import compact_affine_times, split_times
from hardlinear.layers.equality import EqualityProjector, Float64Constants, constant_lhs

GRADIENTS = ("argmax", "ste")
DOMAIN_POLICIES = ("count", "warn", "error", "warn_once")
# Rows with at most this many nonzeros are evaluated by gathering y's entries (DC-OPF: <= 2 per row).
GATHER_MAX_NNZ = 4
# Logit of rows excluded from the STE surrogate: exp() of it is 0, and unlike -inf it never makes NaN.
EXCLUDED_LOGIT = -1e30


class SlackOperator(nn.Module):
    """``H(x) y`` and ``h(x)`` of a family, evaluated the cheapest way its structure allows.

    Modes, chosen once: ``select`` (one nonzero per row with one common coefficient, e.g. the standard form's
    ``H = [0, -I]``: a slice or an index), ``gather`` (a few nonzeros per row), ``split`` (longer rows in an ``H``
    too large to keep dense, whose long columns are dense enough: those as a dense block, each row once up to sign,
    the rest a sparse product), ``sparse`` (the same without the block), ``dense``, ``batched`` (``H`` depends on x).
    A large ``h(x)`` is kept compact (:func:`~hardlinear.constraints.signed_rows.compact_affine`). Every mode sums each row in
    the dtype asked for, in its own order: the layer's rounding guard bounds any order's error.
    """

    def __init__(self, family: ConstraintFamily) -> None:
        super().__init__()
        self.m, self.n = family.m_ineq, family.n
        B = np.asarray(family.B_ineq, dtype=np.float64)
        self.has_rhs = bool(np.any(B))
        self.compact_rhs = self.has_rhs and B.size > DENSE_LIMIT
        if self.compact_rhs:  # large: only the rows that read the inputs, each once up to sign (the family's, shared)
            arrays = {f"rhs_{name}": value for name, value in family.compact_rhs().items()}
            for name in ("rhs_rows", "rhs_index"):
                self.register_buffer(name, torch.as_tensor(arrays.pop(name), dtype=torch.long), persistent=False)
        else:
            arrays = {"B_T": B.T} if self.has_rhs else {}
        H = constant_lhs(family, "H", sparse=True)  # sparse: the standard form's [0, -I] is 2 GB dense at 2,000 buses
        index = np.zeros(0, dtype=np.int64)
        self.start = self.stop = -1
        self.coef = 1.0
        if H is None:
            assert isinstance(family, InputDependentFamily)
            self.mode = "batched"
            arrays["H_flat"] = family.H_stack.reshape(family.k + 1, -1)
            arrays["H_row_norms"] = np.abs(family.H_stack).sum(axis=2)  # (k + 1, m)
            self.max_row_norm = float("nan")
            used = np.flatnonzero(np.any(family.H_stack, axis=(0, 1)))
        else:
            H = H.copy()
            H.eliminate_zeros()
            H.sum_duplicates()  # canonical CSR: entries in row-major order, as np.nonzero of the dense H
            self.max_row_norm = float(abs(H).sum(axis=1).max()) if self.m else 0.0
            used = np.unique(H.indices)
            nnz = np.diff(H.indptr)
            p = int(nnz.max()) if self.m else 0
            coo = H.tocoo()
            rows, cols, vals = coo.row.astype(np.int64), coo.col.astype(np.int64), coo.data
            if p == 1 and np.all(nnz == 1) and np.unique(vals).size == 1:
                self.mode, self.coef = "select", float(vals[0])
                order = np.argsort(rows, kind="stable")
                idx = cols[order]
                if np.array_equal(idx, np.arange(idx[0], idx[0] + self.m)):
                    self.start, self.stop = int(idx[0]), int(idx[0]) + self.m
                index = idx
            elif p > GATHER_MAX_NNZ and self.m * self.n > DENSE_LIMIT:
                # long rows of a large H (PGLearn's dispatch in the inequality form: PTDF rows over every
                # generator, 261 entries at case1354). Gathering p entries per row copied B m p floats (1.4 s a
                # training step there); a sparse product of the whole H took 0.13 s; its long columns as a dense
                # block (rows taken once up to sign) and the rest sparse take a tenth of that (split_long_columns)
                split = family.long_column_split(H)  # the family's own products use the same (shared, made once)
                self.mode = "sparse" if split is None else "split"
                if split is not None:
                    arrays["split_T"], arrays["split_sign"] = split["block_T"], split["sign"]
                    for name in ("index", "rows", "cols"):
                        self.register_buffer(f"split_{name}", torch.as_tensor(split[name], dtype=torch.long), persistent=False)
                self._sparse = {"cpu-float64": sparse_coo(H if split is None else split["rest"], torch.float64)}
            elif p <= GATHER_MAX_NNZ or self.m * self.n > DENSE_LIMIT:
                self.mode = "gather"
                # Rows padded to p entries with coefficient 0 (pointing at column 0).
                idx, coef = np.zeros((self.m, max(p, 1)), dtype=np.int64), np.zeros((self.m, max(p, 1)))
                slot = np.arange(rows.size) - np.searchsorted(rows, rows)  # position within its row
                idx[rows, slot], coef[rows, slot] = cols, vals
                index = idx.reshape(-1)
                arrays["coef"] = coef
            else:
                self.mode = "dense"
                arrays["H_T"] = H.toarray().T
        contiguous = used.size and used[-1] - used[0] + 1 == used.size
        self.cols = (int(used[0]), int(used[-1]) + 1) if contiguous else (0, self.n)
        self.register_buffer("index", torch.as_tensor(index, dtype=torch.long), persistent=False)
        self.consts = Float64Constants(**arrays)

    def extra_repr(self) -> str:
        return f"m_ineq={self.m}, mode={self.mode}"

    def rhs(self, xi: torch.Tensor, like: torch.Tensor) -> torch.Tensor | None:
        """``xi: (B, k) -> h(x): (B, m)`` in ``like``'s dtype, or None when ``h = 0``."""
        if not self.has_rhs:
            return None
        if self.compact_rhs:
            b0, U_T, sign = self.consts.get(("rhs_b0", "rhs_U_T", "rhs_sign"), like)
            return compact_affine_times(xi.to(like.dtype), b0, U_T, sign, self.rhs_rows, self.rhs_index)
        (B_T,) = self.consts.get(("B_T",), like)
        return lift(xi.to(like.dtype)) @ B_T

    def _columns(self, y: torch.Tensor) -> torch.Tensor:
        if self.start >= 0:
            return y[:, self.start : self.stop]
        cols = y.index_select(1, self.index)
        return cols if self.mode == "select" else cols.view(y.shape[0], self.m, -1)

    def times(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k), y: (B, n) -> H(x) y: (B, m)``."""
        if self.mode == "select":
            cols = self._columns(y)
            return cols if self.coef == 1.0 else self.coef * cols
        if self.mode == "gather":
            (coef,) = self.consts.get(("coef",), y)
            return (self._columns(y) * coef).sum(dim=2)
        if self.mode == "sparse":
            return torch.sparse.mm(self._sparse_H(y), y.T).T
        if self.mode == "split":
            block_T, sign = self.consts.get(("split_T", "split_sign"), y)
            return split_times(y, self._sparse_H(y), block_T, sign, self.split_index, self.split_rows, self.split_cols)
        if self.mode == "batched":
            (H_flat,) = self.consts.get(("H_flat",), y)
            H = (lift(xi.to(y.dtype)) @ H_flat).view(-1, self.m, self.n)
            return (H @ y.unsqueeze(2)).squeeze(2)
        (H_T,) = self.consts.get(("H_T",), y)
        return y @ H_T

    def _sparse_H(self, like: torch.Tensor) -> torch.Tensor:
        """``H`` as a sparse COO tensor on ``like``'s device and dtype (made from the float64 one, kept per key)."""
        key = f"{like.device}-{_dtype_name(like.dtype)}"
        if key not in self._sparse:
            self._sparse[key] = self._sparse["cpu-float64"].to(device=like.device, dtype=like.dtype)
        return self._sparse[key]

    def slack(self, xi: torch.Tensor, y: torch.Tensor, h: torch.Tensor | None) -> torch.Tensor:
        """``h - H y: (B, m)`` given ``h`` from :meth:`rhs` (None means 0)."""
        if self.mode == "select" and self.coef == -1.0:
            cols = self._columns(y)
            return cols if h is None else h + cols
        Hy = self.times(xi, y)
        return -Hy if h is None else h - Hy

    def support(self, y: torch.Tensor) -> torch.Tensor:
        """The columns of ``y`` that ``H`` touches when they form a range (the standard form's slacks), else ``y``."""
        return y[:, self.cols[0] : self.cols[1]]

    def row_norm(self, xi: torch.Tensor) -> torch.Tensor | float:
        """``max_i ||H_i(x)||_1``: a float for constant ``H``, ``(B, 1)`` (an upper bound) when ``H`` varies."""
        if self.mode != "batched":
            return self.max_row_norm
        (norms,) = self.consts.get(("H_row_norms",), xi)
        return (lift(xi).abs() @ norms).amax(dim=1, keepdim=True)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _widened_box(box: InputBox) -> dict[str, np.ndarray]:
    """``lo_<dtype>``, ``hi_<dtype>``: the box widened by the rounding of each input dtype.

    Why: a float32 copy of an input on the bound may round outside it, and that is not out of domain.
    """
    slack = 1.0 + np.maximum(np.abs(box.lo), np.abs(box.hi))
    out = {}
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        tol = 4.0 * torch.finfo(dtype).eps * slack
        out[f"lo_{_dtype_name(dtype)}"], out[f"hi_{_dtype_name(dtype)}"] = box.lo - tol, box.hi + tol
    return out


def _to(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return t if t.dtype == dtype else t.to(dtype)


def _inf_norm(v: torch.Tensor) -> torch.Tensor:
    """``(B, n) -> (B, 1)``: the largest absolute entry of each row."""
    return torch.linalg.vector_norm(v, ord=float("inf"), dim=1, keepdim=True)


def _module_dtype(module: nn.Module) -> torch.dtype | None:
    for t in chain(module.parameters(), module.buffers()):
        if t.is_floating_point():
            return t.dtype
    return None


class FeasibilityLayer(nn.Module):
    """``forward(xi: (B, k), y_task: (B, n)) -> y: (B, n)``, feasible for every ``xi`` in the box.

    Args:
        family: the constraint family of the problem's form (``problem.family``).
        safe: a module ``xi: (B, k) -> (B, n)`` whose output is feasible for every ``xi`` in the box (the
            decision rule); it is called on ``xi`` cast to its own floating dtype.
        gradient: ``"argmax"`` (the paper) or ``"ste"`` (see the module docstring).
        alpha_dtype: dtype of the slacks, ``alpha`` and the blend (promoted with the input's dtype).
        project_equalities: project ``y_task`` onto the equalities first (off: ``y_task`` must satisfy them).
        ste_temperature: ``T`` of the straight-through surrogate, in units of the ratios (which lie in [0, 1]).
        alpha_margin: extra relative step towards the safe output, ``alpha += margin (1 - alpha)`` whenever
            ``alpha > 0``: every moved row gains at least ``margin * s_SN_i`` of slack (for downstream rounding).
        rounding_guard: the factor ``c`` of the rounding guard (module docstring); 0 turns it off.
        out_of_domain: what to do with inputs outside the box (where nothing is guaranteed): ``"count"`` (only
            ``last_stats``), ``"warn"`` or ``"error"`` (both look at the flags, a device sync), ``"warn_once"``
            (warn at the first call with such inputs, then only count: :func:`hardlinear.feasibility_layer`'s
            default, so that a library user hears of it once without paying a sync on every call after).
        warn_low_precision: warn (once per layer) when ``y_task`` is not float64: the output comes back in
            ``y_task``'s dtype, so its equalities hold to that dtype's rounding (float32: ~1e-7 relative, not
            ~1e-15). On in :func:`hardlinear.feasibility_layer`, where a float32 network's output used to pass
            silently; off here, for the methods that choose their dtype.
        guard_gradient: True (as recorded) differentiates ``alpha`` also where only the rounding guard makes it
            positive (the arg-max row satisfied, ``0 <= s_TN < tau``); False gives it no gradient there, the
            gradient of the layer in exact arithmetic (where ``alpha`` is 0). It matters where task outputs sit
            exactly on a face, as a refinement puts them: there the guard's ``alpha ~ 1e-16`` carries a gradient of
            size ``|y_SN - y_TN| / (s_SN - s_TN)`` that pushes the output off the face (docs/peer_methods.md,
            economic dispatch, third pass).

    Device syncs: one per call (``nonfinite.any()``, to skip the row replacement when nothing is wrong), plus
    the domain policy's when it is not ``"count"``.

    After each call ``last_stats`` holds detached tensors: ``alpha (B,)``, ``nonfinite (B,)`` (task rows
    replaced by the safe output), ``alpha_hit_one ()`` (count of ``alpha >= 1``), ``out_of_domain (B,)``,
    ``safe_infeasible (B,)`` (the safe output violates an inequality: outside the box, or a broken rule).
    """

    def __init__(
        self,
        family: ConstraintFamily,
        safe: nn.Module,
        gradient: str = "argmax",
        alpha_dtype: torch.dtype = torch.float64,
        project_equalities: bool = True,
        ste_temperature: float = 0.1,
        alpha_margin: float = 0.0,
        rounding_guard: float = 4.0,
        out_of_domain: str = "count",
        warn_low_precision: bool = False,
        guard_gradient: bool = True,
    ) -> None:
        super().__init__()
        if gradient not in GRADIENTS:
            raise ValueError(f"gradient must be one of {GRADIENTS}; got {gradient!r}")
        if not (isinstance(alpha_dtype, torch.dtype) and alpha_dtype.is_floating_point):
            raise ValueError(f"alpha_dtype must be a floating torch dtype such as torch.float64; got {alpha_dtype!r}")
        if not ste_temperature > 0:
            raise ValueError(f"ste_temperature must be > 0; got {ste_temperature}")
        if not 0.0 <= alpha_margin < 1.0:
            raise ValueError(f"alpha_margin must be in [0, 1); got {alpha_margin}")
        if not rounding_guard >= 0:
            raise ValueError(f"rounding_guard must be >= 0 (0 turns it off); got {rounding_guard}")
        if out_of_domain not in DOMAIN_POLICIES:
            raise ValueError(f"out_of_domain must be one of {DOMAIN_POLICIES}; got {out_of_domain!r}")
        if not isinstance(safe, nn.Module):
            raise TypeError(f"safe must be a torch.nn.Module mapping xi to a feasible y; got {type(safe).__name__}")
        self.n, self.k = family.n, family.k
        self.safe = safe
        self.projector = EqualityProjector(family) if project_equalities and family.m_eq else None
        self.slacks = SlackOperator(family)
        self.box = Float64Constants(**_widened_box(family.box))
        self.polytope = getattr(family, "polytope", None)  # the input set, when it is a polytope (inside the box)
        if self.polytope is not None:
            scale = 1.0 + float(np.linalg.norm(np.maximum(np.abs(family.box.lo), np.abs(family.box.hi))))
            self._polytope_scale = scale + float(np.max(np.abs(self.polytope.b) / np.linalg.norm(self.polytope.A, axis=1)))
        self.gradient, self.alpha_dtype = gradient, alpha_dtype
        self.ste_temperature, self.alpha_margin = float(ste_temperature), float(alpha_margin)
        self.rounding_guard, self.out_of_domain = float(rounding_guard), out_of_domain
        self._domain_warned = False
        self._last: tuple[torch.Tensor, ...] | None = None
        self.warn_low_precision = bool(warn_low_precision)
        self.guard_gradient = bool(guard_gradient)

    def extra_repr(self) -> str:
        return f"n={self.n}, gradient={self.gradient}, alpha_dtype={self.alpha_dtype}"

    # --- pieces ------------------------------------------------------------------------------------
    def project(self, xi: torch.Tensor, y_task: torch.Tensor) -> torch.Tensor:
        """``(B, k), (B, n) -> y_TN: (B, n)``: the task output on the equalities (in its dtype)."""
        return y_task if self.projector is None else self.projector(xi, y_task)

    def safe_output(self, xi: torch.Tensor) -> torch.Tensor:
        """``(B, k) -> y_SN: (B, n)``."""
        dtype = _module_dtype(self.safe)
        return self.safe(xi if dtype is None else xi.to(dtype))

    def domain_flags(self, xi: torch.Tensor) -> torch.Tensor:
        """``(B, k) -> (B,)`` bool: outside the box (and the input polytope, if any) by more than the rounding of
        ``xi``'s dtype (or NaN)."""
        name = _dtype_name(xi.dtype)
        lo, hi = self.box.get((f"lo_{name}", f"hi_{name}"), xi)
        out = (xi.clamp(lo, hi) != xi).any(dim=1)  # a NaN stays NaN, unequal to itself: flagged (3 passes, not 5)
        if self.polytope is not None:
            tol = 8.0 * torch.finfo(xi.dtype).eps * self._polytope_scale
            out = out | ~(self.polytope.violation(xi) <= tol)
        return out

    def _alpha(self, need: torch.Tensor, s_tn: torch.Tensor, s_sn: torch.Tensor) -> torch.Tensor:
        """``(B, m) x 3 -> (B,)``: the largest ratio ``need_i / (s_SN_i - s_TN_i)`` clipped to [0, 1].

        The max over all rows is taken without a graph; the gradient is then attached to the arg-max row only
        (the paper), or to the straight-through surrogate, and only where ``0 < alpha < 1``: at 0 the output is
        the task's, at 1 the safe output, and the ratios of rows the max ignores may overflow (0 * inf = NaN).
        """
        if need.shape[1] == 0:
            return need.new_zeros(need.shape[0])
        tiny = torch.finfo(need.dtype).tiny
        with torch.no_grad():
            # Rows the task output satisfies have need <= 0, hence ratio <= 0; where the safe output is no
            # better (gap <= 0) the ratio is huge: alpha = 1.
            hard, row = (need / (s_sn - s_tn).clamp_min(tiny)).max(dim=1)
            clipped = hard.clamp(0.0, 1.0)
        if not (need.requires_grad or s_sn.requires_grad):
            return clipped
        inner = (hard > 0) & (hard < 1)
        if not self.guard_gradient:  # only where the arg-max row is violated: alpha > 0 in exact arithmetic
            inner = inner & (s_tn.detach().gather(1, row.unsqueeze(1)).squeeze(1) < 0)
        if self.gradient == "argmax":
            i = row.unsqueeze(1)
            gap = (s_sn.gather(1, i) - s_tn.gather(1, i)).squeeze(1).clamp_min(tiny)
            exact = need.gather(1, i).squeeze(1) / torch.where(inner, gap, 1.0)  # the same floats as `hard`
            return torch.where(inner, exact, clipped)
        # Straight-through: forward the exact max, backward the gradient of T logsumexp(ratio / T) over the
        # rows that move and whose ratio lies in (0, 1) (the others cannot be the arg max of an inner alpha).
        gap = s_sn - s_tn
        ok = (need > 0) & (gap > need)
        ratio = need / torch.where(ok, gap, 1.0)
        logits = torch.where(ok, ratio / self.ste_temperature, EXCLUDED_LOGIT)
        soft = self.ste_temperature * torch.logsumexp(logits, dim=1)
        return torch.where(inner, clipped + (soft - soft.detach()), clipped)  # forward: exactly the max

    def _guard(self, xi: torch.Tensor, y_tn: torch.Tensor, y_sn: torch.Tensor, h, out_dtype) -> torch.Tensor:
        """``(B, 1)``: the slack ``tau`` that rows moved by the blend are pushed to (module docstring)."""
        unit = torch.finfo(out_dtype).eps + torch.finfo(y_tn.dtype).eps
        scale = (self.rounding_guard * unit) * self.slacks.row_norm(xi)
        size = _inf_norm(self.slacks.support(y_tn)) + _inf_norm(self.slacks.support(y_sn))
        return scale * size if h is None else scale * size + (self.rounding_guard * unit) * _inf_norm(h)

    def _needs(self, xw, y_tn, y_sn, h, out_dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``(s_TN, need)``, both ``(B, m)``: the task output's slacks and ``tau - s_TN`` (``-s_TN`` unguarded)."""
        s_tn = self.slacks.slack(xw, y_tn, h)
        if self.rounding_guard > 0:
            with torch.no_grad():
                tau = self._guard(xw, y_tn, y_sn, h, out_dtype)
            return s_tn, tau - s_tn
        return s_tn, -s_tn

    def _check_call(self, xi: Any, y_task: Any) -> None:
        """Clear errors for what torch would report obscurely: arrays that are not tensors, integer tensors, wrong
        shapes, batches of different lengths."""
        for name, value in (("xi", xi), ("y_task", y_task)):
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"{name} must be a torch.Tensor; got {type(value).__name__} (use torch.as_tensor({name}, dtype=torch.float64))")
            if not value.is_floating_point():
                raise TypeError(f"{name} must be a floating tensor; got {value.dtype} (use {name}.double())")
        if y_task.dim() != 2 or y_task.shape[1] != self.n or xi.dim() != 2 or xi.shape[1] != self.k:
            raise ValueError(
                f"expected xi (B, {self.k}) and y_task (B, {self.n}); got {tuple(xi.shape)}, {tuple(y_task.shape)}"
            )
        if xi.shape[0] != y_task.shape[0]:
            raise ValueError(f"xi has {xi.shape[0]} rows and y_task {y_task.shape[0]}: one row of each per instance")

    # --- the layer ---------------------------------------------------------------------------------
    def forward(self, xi: torch.Tensor, y_task: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k), y_task: (B, n) -> (B, n)`` in ``y_task``'s dtype; see the class docstring."""
        self._check_call(xi, y_task)
        if y_task.shape[0] == 0:  # an empty batch: nothing to correct
            return y_task + 0.0
        out_dtype = y_task.dtype
        if self.warn_low_precision and out_dtype != torch.float64:
            self.warn_low_precision = False  # once per layer: a training loop would repeat it every step
            warnings.warn(
                f"hardlinear: y_task is {_dtype_name(out_dtype)}, so the layer returns {_dtype_name(out_dtype)} and the "
                f"equalities hold only to its rounding (about {torch.finfo(out_dtype).eps:.0e} relative, against ~1e-15 "
                "in float64); pass y_task.double() for float64 outputs (the blend is computed in float64 either way), "
                "or feasibility_layer(..., warn_low_precision=False) to keep float32 quietly", UserWarning, stacklevel=2)
        work = torch.promote_types(self.alpha_dtype, out_dtype)

        # --- equality projection, slacks and what each row needs, in the working dtype ---
        # The projection too: in float32 its rounding grows with G's conditioning (a random problem of the
        # guarantee tests reached 26 eps32 per row against the 16 promised); in float64 the float32 output carries
        # only its own final rounding.
        y_tn = self.project(xi, _to(y_task, work))
        with torch.no_grad():
            # A row sum is finite iff every entry is (unless the row is so large that the sum overflows). A
            # non-finite task entry reaches y_TN whenever y_TN depends on y_task at all.
            total = y_tn.sum(dim=1)
            if self.projector is not None and self.projector.rank == self.n:
                total = total + y_task.sum(dim=1)
        y_tn = _to(y_tn, work)
        y_sn = _to(self.safe_output(xi), work)
        xw = _to(xi, work)
        h = self.slacks.rhs(xw, y_tn)
        s_tn, need = self._needs(xw, y_tn, y_sn, h, out_dtype)
        with torch.no_grad():
            # A finite y_TN can still overflow H y (entries ~1e307, or an input-dependent H): its slacks, hence
            # alpha and the gradient, would be NaN. Such rows count as non-finite too and get the safe output.
            total = _to(total, work) + s_tn.sum(dim=1) + need.sum(dim=1)
            finite = (total - total) == 0
        # torch.export records one program for every input: it takes the recompute unconditionally (a no-op on finite
        # rows, bit for bit), so the exported layer treats non-finite rows as this one does
        exporting = torch.compiler.is_exporting()
        all_finite = False if exporting else bool(finite.all())
        if not all_finite:  # recompute those rows from y_TN = 0, so that no inf or NaN enters the graph
            y_tn = torch.where(finite.unsqueeze(1), y_tn, 0.0)
            s_tn, need = self._needs(xw, y_tn, y_sn, h, out_dtype)

        # --- alpha: 0 unless a row is violated, 1 for non-finite task rows ---
        s_sn = self.slacks.slack(xw, y_sn, h)
        alpha = self._alpha(need, s_tn, s_sn)
        if self.alpha_margin > 0:
            alpha = alpha + self.alpha_margin * (1.0 - alpha)
        if s_tn.shape[1]:
            alpha = torch.where(s_tn.amin(dim=1) < 0, alpha, 0.0)
        if not all_finite:
            alpha = torch.where(finite, alpha, 1.0)

        # lerp is exact at both ends: alpha = 0 returns y_TN, alpha = 1 returns y_SN, bit for bit.
        y = _to(torch.lerp(y_tn, y_sn, alpha.unsqueeze(1)), out_dtype)

        # --- bookkeeping: raw pieces now, statistics when asked for (no device sync unless a policy asks) ---
        self._last = (xi.detach(), alpha.detach(), finite, s_sn.detach())
        warns = self.out_of_domain in ("warn", "error") or (self.out_of_domain == "warn_once" and not getattr(self, "_domain_warned", False))
        if warns and not exporting:  # a warning is the eager model's (no exported form)
            ood = self.domain_flags(xi)
            if bool(ood.any()):
                where = "the box" if self.polytope is None else "the input polytope"
                msg = f"{int(ood.sum())} of {ood.numel()} inputs lie outside {where}: feasibility is not guaranteed"
                if self.out_of_domain == "error":
                    raise ValueError(msg + " (out_of_domain='error'; use 'warn' or 'count' to let them through)")
                if self.out_of_domain == "warn_once":
                    self._domain_warned = True
                    msg += (" (said once; layer.last_stats['out_of_domain'] counts them per call, out_of_domain='warn' "
                            "says it every call, 'error' refuses, 'count' is silent)")
                warnings.warn(msg, stacklevel=2)
        return y

    @property
    def last_stats(self) -> dict[str, torch.Tensor]:
        """Statistics of the last call (computed on access, so that inference does not pay for them)."""
        if self._last is None:
            return {}
        xi, alpha, finite, s_sn = self._last
        with torch.no_grad():
            return {
                "alpha": alpha,
                "nonfinite": ~finite,
                "alpha_hit_one": (alpha >= 1.0).sum(),
                "out_of_domain": self.domain_flags(xi),
                "safe_infeasible": s_sn.amin(dim=1) < 0 if s_sn.shape[1] else torch.zeros_like(finite),
            }
