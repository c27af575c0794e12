"""Inference-time fusion of the proposed method: task network, equality projection and blend in few matmuls.

Why: at inference the unfused path (``net``, then :class:`~hardlinear.layers.feasibility.FeasibilityLayer`)
reads ~5.7 MB of float64 constants per call at 200 buses (the projection's ``W`` and the rule's ``linear``,
both ``n x (k + 1)`` with ``n = 1527``) on top of the network's own last layer (1.6 MB of float32), and runs
~40 small torch ops; the targets of issue 6 ask for at most 1.5x (batch 1) and 2x (batch 4096) the bare MLP.

Derivation (eval mode, no gradient, constant ``G`` and ``H``, the projection's null form: ``y_TN = N N' y + P x``
with ``N: (n, d)`` an orthonormal null-space basis of ``G`` and ``P = G^+ B_eq``, ``x = (1, xi)``):

* **Network**: ``Standardize`` and eval-mode batch normalisation are affine, so they fold into the linear
  layers: ``z = relu(W_2 relu(W_1 xi + b_1) + b_2)``, the last hidden activation.
* **Projection**: ``y_task = W_L z + b_L`` enters ``y_TN`` only through ``u = N' y_task = (N' W_L) z + N' b_L``,
  a ``d x h`` layer (``d = 31`` at 200 buses instead of ``n = 1527`` outputs): ``y_TN = P x + N u``. This holds
  for any ``d``, also above the width ``h`` (``d = 760`` at case6470_rte against ``h = 256``: the unfused path's
  ``n x h`` layer and two ``n x d`` products become one ``d x h`` and one ``n x d``).
* **Safe output**: the rule ``y_SN = F x`` enters through its null coordinates ``w = (N' F) x``, a ``d x (k + 1)``
  matrix: the fused path blends with ``F~ x = P x + N w``, the rule projected onto the equalities. ``F - F~ =
  G^+ (G F - B_eq)`` is the rule's own equality residual (~1e-15 of its size over the box for the solved
  DC-OPF rules: they are re-projected after solving); :class:`FusedProposed` measures it at build time and
  refuses (``NotFusable``) above ``rule_tol``, or when ``F~`` would lose the rule's positive worst-case margin.
* **Standard form**: each slack column ``j`` is fixed by one equality row ``i`` (``H_i y + s_j = h_i``), so
  ``(P x)_j = (h_i - G_iK (P x)_K) / G_ij`` needs ``P x`` only on the other columns ``K`` (483 of 1527 at 200
  buses) and a sparse product with at most two entries per slack (and its constant). Input columns that no
  affine map reads (zero-load buses: 92 of 201 at 200 buses) are dropped.

So one ``k_active x (d + n_K + 1)`` float64 matmul gives ``w`` and ``(P x)_K`` (0.45 MB at 200 buses), a sparse
product completes ``P x``, and two rank-``d`` updates give ``y_TN`` and ``F~ x``. From there the arithmetic is
the layer's, op for op, in its working dtype (float64 by default): the non-finite check, the slacks, the
rounding guard, ``alpha`` and the ``lerp``. Rows whose projected task output is feasible (``alpha = 0``) skip
the safe output entirely; when at most half the rows of a chunk move, only those rows compute it. Large
batches run in chunks of ~2 MB of float64 rows, so that the elementwise passes stay in cache.

Batch 1 (the standard form: slack completion, slacks ``y[:, s0:s1]``, ``h = 0``, float64 output) runs two
functions instead of ~30 torch calls: :func:`_row_task` (network, ``[w | P x]``, the completion as a gather,
``y_TN`` and its smallest slack), one sync, and :func:`_row_blend` only for a row that moves; ``row_mode``
(default :data:`ROW_MODE`) runs them under TorchScript (``script``), ``torch.compile`` (``compile``), as they are
(``eager``), or not at all (``off``: the general path). A non-finite row goes to the general path. Blocks of rows
complete ``P x`` by the same gather, written into ``P x`` in place, and the safe output overwrites ``P x``.

Blocks of rows (the same structure) can run the same arithmetic as two functions, :func:`_chunk_task` (``y_TN``
written into the output's rows, ``[w | P x]``, the key) and :func:`_chunk_blend` (the blend over every row of the
chunk, those whose key says ``alpha = 0`` masked, written over ``y_TN``), one sync between them: ``batch_mode``
(default :data:`BATCH_MODE`, ``off``: :meth:`FusedProposed._rows`) runs them under ``torch.compile`` (``compile``:
inductor fuses the slack, guard, quotient and ``lerp`` passes into a few loops; one compiled version per chunk shape,
i.e. ``chunk_rows`` and the last chunk's) or as written (``eager``). A compiler that fails is reported once and
replaced by the eager functions. What changes: the matmuls stay MKL's (inductor's extern kernels), the
reductions (maxima, minima) are exact in any order, and inductor compiles with ``-ffp-contract=off``, so its
``lerp`` rounds the product and the sum where aten's vectorised ``lerp`` rounds once (a fused multiply-add): the
moved rows differ from the default path in the last bit (measured <= 2e-16 relative; alpha within 2e-15, equal on
trained networks), well inside the rounding guard (``8 eps`` of the rows' size), and rows with ``alpha = 0`` are
the same bits. Every slack of the compiled outputs is >= 0 exactly (tests/test_fused.py on dcopf_14/118,
benchmarks/investigations/fused_compile_exactness.py on trained runs). Measured 1.5-2.7x faster than ``off`` at batch 4096
(benchmarks/README.md), but opt-in: the compile costs ~25 s per process and batch size (two chunk shapes, two
functions), each new batch size brings a new last chunk, and past dynamo's recompile limit a shape runs eager.

Guarantees: those of the layer, for the rule ``F~``: inequalities as the layer's (same guard, same ``alpha``
and ``lerp`` on the same kind of vectors); equalities exact up to the float64 rounding of ``P x + N v`` (at
``alpha = 1`` this is tighter than the unfused layer, which returns ``F x`` with the rule's residual);
a row whose task output is not finite gets ``alpha = 1``; a row with a non-finite input is NaN (as unfused).
Against the unfused layer (float64 network) outputs and ``alpha`` agree to ~1e-13 relative; with a float32
network they differ by the float32 rounding of ``y_task`` that the fused path no longer forms.

The projection's row form (``y - R R' y + P x``, chosen when the null space is the wider one) fuses the same
way through ``N``, the complement of ``R`` from a complete QR. An input-dependent ``H(x)`` (the portfolio's
inequality form) fuses too: the slacks, the guard's row norms (per instance, as the layer's) and the rule
``F x`` itself (not its projection: its margin under ``H(x)`` has no closed form over the box) are evaluated
per call. Float32 outputs (``layer_dtype="float32"``): the rule, ``P x``, the slacks, the guard and ``alpha``
stay float64 (the rule's margin is verified in float64, and the guard covers the float32 rounding only on top
of float64 slacks); ``y_TN`` is rounded to float32 *before* its slacks are taken, so that a row left alone
(``alpha = 0``) is returned exactly as checked; the hidden layers run in the network's dtype.

Anything else (an input-dependent ``G(x)``, the portfolio's standard form: the projection needs a per-instance
factorisation of ``G(x) G(x)'`` and its rule is quadratic; no equalities; a non-affine safe network) raises :class:`NotFusable`, and :func:`fuse` returns :class:`LayerPath`,
the unfused layer behind the same interface, with a warning that names the reason.
"""

from __future__ import annotations

import logging
import math
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from hardlinear.layers.equality import constant_lhs
from hardlinear.layers.feasibility import FeasibilityLayer, SlackOperator, _inf_norm, _module_dtype, _to

log = logging.getLogger(__name__)

# Relative size of the rule's equality residual (over the box) up to which it is replaced by its projection.
RULE_TOL = 1e-9
# Rows per chunk of a large batch: about this many bytes of one float64 (rows, n) temporary.
CHUNK_BYTES = 2 << 20
STATS = ("alpha", "nonfinite", "alpha_hit_one", "out_of_domain", "safe_infeasible")


class NotFusable(ValueError):
    """The method's structure does not admit the fused path; the message says why."""


# --- the network ---------------------------------------------------------------------------------------
def fold_network(net: nn.Module) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], tuple[torch.Tensor, torch.Tensor]]:
    """``(hidden, last)``: the eval-mode network as ReLU layers ``[(W, b), ...]`` and a last affine ``(W, b)``,
    all float64, with ``Standardize`` and batch normalisation folded in. Raises NotFusable for other modules."""
    from hardlinear.layers.network import MLP, OutputAffine, Standardize

    seq = net.net if isinstance(net, MLP) else net
    if not isinstance(seq, nn.Sequential):
        raise NotFusable(f"the task network is a {type(net).__name__}, not a Sequential of known layers")
    pre: tuple[torch.Tensor, torch.Tensor] | None = None  # (mean, inv_std) of a leading Standardize
    stages: list[list[Any]] = []  # [W, b, followed_by_relu]
    for mod in seq:
        if isinstance(mod, Standardize):
            if stages or pre is not None:
                raise NotFusable("Standardize after the first layer")
            pre = (mod.mean.detach().double(), mod.inv_std.detach().double())
        elif isinstance(mod, nn.Linear):
            W = mod.weight.detach().double()
            b = mod.bias.detach().double() if mod.bias is not None else W.new_zeros(W.shape[0])
            if not stages and pre is not None:
                W = W * pre[1]
                b = b - W @ pre[0]
                pre = None
            if stages and not stages[-1][2]:  # two affine maps in a row compose
                W0, b0, _ = stages.pop()
                W, b = W @ W0, W @ b0 + b
            stages.append([W, b, False])
        elif isinstance(mod, nn.BatchNorm1d):
            if not stages or stages[-1][2] or mod.running_mean is None or mod.training:
                raise NotFusable("batch normalisation that is not an eval-mode affine map after a linear layer")
            scale = (mod.running_var.detach().double() + mod.eps).rsqrt()
            shift = -mod.running_mean.detach().double() * scale
            if mod.affine:
                scale, shift = scale * mod.weight.detach().double(), shift * mod.weight.detach().double()
                shift = shift + mod.bias.detach().double()
            stages[-1][0] = stages[-1][0] * scale[:, None]
            stages[-1][1] = stages[-1][1] * scale + shift
        elif isinstance(mod, OutputAffine):
            if not stages or stages[-1][2]:
                raise NotFusable("an output scaling that does not follow a linear layer")
            scale = mod.scale.detach().double()
            stages[-1][0] = stages[-1][0] * scale[:, None]
            stages[-1][1] = stages[-1][1] * scale + mod.offset.detach().double()
        elif isinstance(mod, nn.ReLU):
            if not stages:
                raise NotFusable("ReLU before the first linear layer")
            stages[-1][2] = True
        elif isinstance(mod, (nn.Identity, nn.Dropout)):
            continue
        else:
            raise NotFusable(f"the task network contains a {type(mod).__name__}")
    if not stages or stages[-1][2] or pre is not None:
        raise NotFusable("the task network does not end in a linear layer")
    return [(W, b) for W, b, _ in stages[:-1]], (stages[-1][0], stages[-1][1])


# --- the standard form's slack columns -------------------------------------------------------------------
def slack_completion(G: np.ndarray | sp.spmatrix, B_eq: np.ndarray, slacks: SlackOperator) -> dict[str, np.ndarray] | None:
    """How the standard form's slack columns follow from the others, or None when the family is not of that form.

    Needs the slacks to be the trailing columns ``[start, n)`` (``H = [0, -I]``, ``h = 0``), each fixed by one
    equality row ``i`` with no other slack, and ``h_i`` constant: then ``y_j = h0_j - sum_l coef_jl y_K[idx_jl]``.
    """
    n = G.shape[1]
    if not (slacks.mode == "select" and slacks.coef == -1.0 and slacks.start >= 0 and slacks.stop == n):
        return None
    if slacks.has_rhs or slacks.start == 0:
        return None
    start = slacks.start
    G = sp.csr_matrix(G, dtype=np.float64)  # sparse throughout: the dense G is gigabytes on large grids
    G.eliminate_zeros()
    D = G[:, start:].tocsc()
    D.sort_indices()
    if not np.all(np.diff(D.indptr) == 1):
        return None
    eq_rows = D.indices.astype(np.int64)  # the one equality row of each slack column
    if np.unique(eq_rows).size != eq_rows.size or np.any(B_eq[eq_rows, 1:]):
        return None
    c = D.data
    GK = sp.csr_matrix(sp.diags(1.0 / c) @ G[eq_rows][:, :start])
    GK.eliminate_zeros()
    GK.sum_duplicates()  # canonical: row-major entries, as np.nonzero of the dense matrix
    nnz = np.diff(GK.indptr)
    p = max(int(nnz.max()), 1)
    idx, coef = np.zeros((GK.shape[0], p), dtype=np.int64), np.zeros((GK.shape[0], p))
    coo = GK.tocoo()
    r, k = coo.row.astype(np.int64), coo.col.astype(np.int64)
    slot = np.arange(r.size) - np.searchsorted(r, r)
    idx[r, slot], coef[r, slot] = k, coo.data
    return {"h0": B_eq[eq_rows, 0] / c, "idx": idx, "coef": coef, "start": np.array(start)}


def _box_bound(M: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``M: (r, k + 1)``: the smallest and largest value of ``M x`` over the box (closed form)."""
    mid, rad = 0.5 * (lo + hi), 0.5 * (hi - lo)
    centre = M[:, 0] + M[:, 1:] @ mid
    spread = np.abs(M[:, 1:]) @ rad
    return centre - spread, centre + spread


def _csr(S: sp.csr_matrix, device: torch.device) -> torch.Tensor:
    S = S.tocsr()
    S.sort_indices()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
        return torch.sparse_csr_tensor(
            torch.as_tensor(S.indptr, dtype=torch.int64),
            torch.as_tensor(S.indices, dtype=torch.int64),
            torch.as_tensor(S.data, dtype=torch.float64),
            size=S.shape,
            device=device,
        )


def _max_abs(v: torch.Tensor) -> torch.Tensor:
    """``(B, n) -> (B, 1)``: the same values as the layer's ``_inf_norm``; ``vector_norm(inf)`` is 7x slower
    than this on a block of rows (and a little faster on one row), ``abs()`` first writes a temporary."""
    if v.shape[0] == 1:
        return _inf_norm(v)
    lo, hi = torch.aminmax(v, dim=1, keepdim=True)  # one pass for both
    return torch.maximum(hi, lo.neg_())


# --- batch 1: one row in few dispatches ------------------------------------------------------------------
def _row_task(
    xi: torch.Tensor, xw: torch.Tensor, Ws: list[torch.Tensor], bs: list[torch.Tensor], A_T: torch.Tensor,
    a: torch.Tensor, active: torch.Tensor, bias: torch.Tensor, M_T: torch.Tensor, idx: torch.Tensor,
    coef: torch.Tensor, h0: torch.Tensor, N_T: torch.Tensor, d: int, cols: int, s0: int, s1: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One row, standard form (slacks ``y[:, s0:s1]``, ``h = 0``): ``(y_TN, P x, w, key)`` as :meth:`FusedProposed._rows`
    computes them, with the slack completion as a gather (``h0 - sum coef * (P x)_K[idx]``) instead of a sparse
    product. Written for TorchScript (no Python objects, no data-dependent branch)."""
    z = xi
    for i in range(len(Ws)):
        z = torch.relu(torch.nn.functional.linear(z, Ws[i], bs[i]))
    u = torch.addmm(a, z, A_T).to(torch.float64)
    wp = torch.addmm(bias, xw.index_select(1, active), M_T)
    pk = wp[:, d : d + cols]
    q = h0 - (pk[:, idx] * coef).sum(dim=2)
    px = torch.cat([pk, q], dim=1)
    y_tn = torch.addmm(px, u, N_T)
    total = y_tn.sum(dim=1)
    key = y_tn[:, s0:s1].amin(dim=1) + (total - total)
    return y_tn, px, wp[:, :d], key


def _row_blend(
    y_tn: torch.Tensor, px: torch.Tensor, w: torch.Tensor, N_T: torch.Tensor, s0: int, s1: int, c0: int, c1: int,
    guard: float, tiny: float, margin: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One finite row that moves: ``(y, alpha)`` by the layer's arithmetic (:meth:`FusedProposed._blend` with
    ``h = 0`` and the slacks ``y[:, s0:s1]``)."""
    y_sn = torch.addmm(px, w, N_T)
    s_tn, s_sn = y_tn[:, s0:s1], y_sn[:, s0:s1]
    size = torch.linalg.vector_norm(y_tn[:, c0:c1], float("inf"), dim=1, keepdim=True) + torch.linalg.vector_norm(
        y_sn[:, c0:c1], float("inf"), dim=1, keepdim=True
    )
    need = guard * size - s_tn if guard > 0 else -s_tn
    alpha = (need / (s_sn - s_tn).clamp_min(tiny)).amax(dim=1).clamp(0.0, 1.0)
    if margin > 0:
        alpha = alpha + margin * (1.0 - alpha)
    return torch.lerp(y_tn, y_sn, alpha.unsqueeze(1)), alpha


ROW_MODES = ("script", "compile", "eager", "off")


def _row_functions(mode: str):
    """``(task, blend)`` for a batch-1 mode: TorchScript, ``torch.compile`` (inductor: needs a C++ compiler on the
    CPU), eager, or None (``off``)."""
    if mode == "off":
        return None
    if mode == "eager":
        return _row_task, _row_blend
    if mode == "script":
        from hardlinear.runtime.torchscript import script

        return script(_row_task, "the fused batch-1 task"), script(_row_blend, "the fused batch-1 blend")
    if mode == "compile":
        return torch.compile(_row_task, dynamic=False), torch.compile(_row_blend, dynamic=False)
    raise ValueError(f"row_mode must be one of {ROW_MODES}; got {mode!r}")


ROW_MODE = "script"  # the default batch-1 path (benchmarks/README.md: measured against eager and torch.compile)
_ROW_CACHE: dict[str, Any] = {}  # mode -> (task, blend): scripted or compiled once a process


# --- blocks of rows: the same arithmetic as two functions that torch.compile can fuse ------------------------
def _chunk_task(
    xi: torch.Tensor, xw: torch.Tensor, Ws: list[torch.Tensor], bs: list[torch.Tensor], A_T: torch.Tensor,
    a: torch.Tensor, active: torch.Tensor, bias: torch.Tensor, M_T: torch.Tensor, idx: torch.Tensor,
    coef: torch.Tensor, h0: torch.Tensor, N_T: torch.Tensor, d: int, cols: int, s0: int, s1: int, out: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A block of rows, standard form: ``y_TN`` written into ``out``, and ``(P x, w, key)``: :func:`_row_task`'s
    arithmetic (that of :meth:`FusedProposed._rows`) under its own code object, so that its compiled versions
    (one per block shape) are cached apart from the batch-1 ones."""
    y_tn, px, w, key = _row_task(xi, xw, Ws, bs, A_T, a, active, bias, M_T, idx, coef, h0, N_T, d, cols, s0, s1)
    out.copy_(y_tn)
    return px, w, key


def _chunk_blend(
    y: torch.Tensor, px: torch.Tensor, w: torch.Tensor, ok: torch.Tensor, N_T: torch.Tensor, s0: int, s1: int,
    c0: int, c1: int, guard: float, tiny: float, margin: float,
) -> torch.Tensor:
    """A block of finite rows, ``y`` holding ``y_TN``: the blend written over ``y``, and ``alpha``, by
    :meth:`FusedProposed._blend`'s arithmetic op for op (``h = 0``, slacks ``y[:, s0:s1]``); ``ok``: rows that
    keep ``y_TN`` (``alpha = 0``). Every row's safe output is formed (no data-dependent branch)."""
    y_sn = torch.addmm(px, w, N_T)
    s_tn, s_sn = y[:, s0:s1], y_sn[:, s0:s1]
    size = y[:, c0:c1].abs().amax(dim=1, keepdim=True) + y_sn[:, c0:c1].abs().amax(dim=1, keepdim=True)
    need = guard * size - s_tn if guard > 0 else -s_tn
    alpha = (need / (s_sn - s_tn).clamp_min(tiny)).amax(dim=1).clamp(0.0, 1.0)
    if margin > 0:
        alpha = alpha + margin * (1.0 - alpha)
    alpha = alpha.masked_fill(ok, 0.0)
    y.copy_(torch.lerp(y, y_sn, alpha.unsqueeze(1)))
    return alpha


BATCH_MODES = ("compile", "eager", "off")


def _chunk_functions(mode: str):
    """``(task, blend)`` for a block mode: ``torch.compile`` (inductor, one compiled version per block shape;
    needs a C++ compiler on the CPU: compilation happens at the first call), as written (``eager``), or None
    (``off``: :meth:`FusedProposed._rows`, which also skips the safe output of rows that stay)."""
    if mode == "off":
        return None
    if mode == "eager":
        return _chunk_task, _chunk_blend
    if mode == "compile":
        return torch.compile(_chunk_task, dynamic=False), torch.compile(_chunk_blend, dynamic=False)
    raise ValueError(f"batch_mode must be one of {BATCH_MODES}; got {mode!r}")


BATCH_MODE = "off"  # the default block path (benchmarks/README.md: compile measured against it)
_BATCH_CACHE: dict[str, Any] = {}  # mode -> (task, blend), or the eager pair after a compiler failed


# --- the fused module ------------------------------------------------------------------------------------
class FusedProposed(nn.Module):
    """``forward(xi: (B, k)) -> y: (B, n)`` in ``out_dtype``: network, projection and blend (module docstring).

    Args:
        family: the problem's constraint family (``problem.family``), constant ``G`` and ``H``.
        net: the task network (eval mode), an MLP or a Sequential of Standardize/Linear/BatchNorm1d/ReLU.
        layer: the method's :class:`FeasibilityLayer`: its projector's factorisation, slack operator, rule,
            rounding guard, ``alpha_margin``, working dtype and domain policy are the ones used.
        out_dtype: the dtype the unfused path returns (``Proposed.layer_dtype``).
        rule_tol: largest relative equality residual of the rule (over the box) that the fused path absorbs.
        chunk_rows: rows per chunk of a large batch (default: about 2 MB of one float64 row block).

    A snapshot: built from the current weights, on their device, never cast or trained;
    :class:`~hardlinear.methods.proposed.Proposed` rebuilds it when a weight changes. ``last_stats`` and
    ``stats(keys)`` as the layer's ``last_stats``.
    """

    fused = True

    def __init__(
        self,
        family,
        net: nn.Module,
        layer: FeasibilityLayer,
        out_dtype: torch.dtype = torch.float64,
        rule_tol: float = RULE_TOL,
        chunk_rows: int | None = None,
        row_mode: str | None = None,
        batch_mode: str | None = None,
    ) -> None:
        super().__init__()
        from hardlinear.rules.decision_rule import DecisionRule

        proj, slacks = layer.projector, layer.slacks
        if proj is None:
            raise NotFusable("no equality projection: the fused path folds the projection into the last layer")
        if proj.input_dependent:
            raise NotFusable(
                "G depends on the input: the projection needs a factorisation of G(x) G(x)' per instance (the "
                "layer's batched Cholesky solve), and a null-space basis of G(x) per instance would cost more"
            )
        if getattr(family, "polytope", None) is not None:
            raise NotFusable("the input set is a polytope: the fused path checks the projected rule's margin over a box")
        rule = layer.safe
        if (
            not isinstance(rule, DecisionRule)
            or rule.quadratic is not None
            or rule.linear.shape != (family.n, family.k + 1)
        ):
            raise NotFusable("the safe network is not an affine decision rule y = F x")
        work = torch.promote_types(layer.alpha_dtype, out_dtype)
        if work != torch.float64:
            raise NotFusable(f"working dtype {work}: the fused constants are float64")
        # Plain attributes, not submodules or buffers (the method owns the layer; a snapshot is rebuilt, never
        # moved or cast); in __dict__ they also skip nn.Module's attribute lookup on every call.
        object.__setattr__(self, "_layer", (layer,))
        object.__setattr__(self, "_slacks", slacks)
        self.n, self.k, self.out_dtype, self.work = family.n, family.k, out_dtype, work
        basis = proj.consts._buffers["basis"]
        device = basis.device
        basis_np = basis.detach().cpu().double().numpy()  # (n, b): null-space (null form) or row-space basis
        P = proj.particular_matrix()  # (n, k + 1): G^+ B_eq
        if proj.form == "null":
            N = basis_np
        else:  # the row form's complement: y - R R' y = N N' y with N the rest of a complete QR of R
            N = np.linalg.qr(basis_np, mode="complete")[0][:, basis_np.shape[1] :]
        d = N.shape[1]
        if d == 0:
            raise NotFusable("the equalities fix every variable: y_TN does not depend on the network")

        # --- the network: folded hidden layers in the network's dtype, the last layer onto N ---
        hidden, (W_L, b_L) = fold_network(net)
        self.net_dtype = _module_dtype(net) or torch.float32
        self.hidden = [(W.to(device, self.net_dtype), b.to(device, self.net_dtype)) for W, b in hidden]
        Nt = torch.as_tensor(N, device=device)
        # u = N' y_task in the network's dtype, as y_task itself (y_TN = P x + N u is float64 either way)
        self.A_T = (Nt.T @ W_L.to(device)).T.contiguous().to(self.net_dtype)  # (h, d)
        self.a = (Nt.T @ b_L.to(device)).to(self.net_dtype)  # (d,)

        # --- the rule through its null coordinates, and what replacing it by its projection costs ---
        F = rule.linear.detach().cpu().double().numpy()  # (n, k + 1)
        Phi = N.T @ F  # (d, k + 1)
        F_proj = P + N @ Phi
        lo, hi = family.box.lo.astype(np.float64), family.box.hi.astype(np.float64)
        e_lo, e_hi = _box_bound(F - F_proj, lo, hi)
        f_lo, f_hi = _box_bound(F, lo, hi)
        resid = float(np.maximum(-e_lo, e_hi).max())
        scale = 1.0 + float(np.maximum(-f_lo, f_hi).max())
        # With an input-dependent H (e.g. the portfolio's inequality form) the projected rule's margin has no
        # closed form over the box: the rule itself is evaluated instead (n is small there), as the layer does.
        self.direct_rule = slacks.mode == "batched"
        if not self.direct_rule and not resid <= rule_tol * scale:
            raise NotFusable(
                f"the rule violates the equalities by {resid / scale:.1e} (relative) > rule_tol {rule_tol:g}"
            )
        if family.m_ineq and not self.direct_rule:
            H = constant_lhs(family, "H", sparse=True)
            B_ineq = np.asarray(family.B_ineq, dtype=np.float64)
            worst_F = float(_box_bound(B_ineq - H @ F, lo, hi)[0].min())
            worst_proj = float(_box_bound(B_ineq - H @ F_proj, lo, hi)[0].min())
            if worst_F > 0 and not worst_proj > 0:
                raise NotFusable(f"the projected rule loses the rule's margin ({worst_F:.3g} -> {worst_proj:.3g})")
        self.rule_residual = resid / scale

        # --- [w | P x] from the inputs that matter; in the standard form P x on the non-slack columns only,
        # with a last column that is 1, and the slacks by a sparse product (<= 2 entries and a constant) ---
        G, B_eq = constant_lhs(family, "G", sparse=True), np.asarray(family.B_eq, dtype=np.float64)
        comp = slack_completion(G, B_eq, slacks)
        self.cols = int(comp["start"]) if comp is not None else self.n
        M = np.hstack([Phi.T, P[: self.cols].T])  # (k + 1, d + cols)
        if comp is not None:
            M = np.hstack([M, np.eye(self.k + 1, 1)])
        used = np.any(M[1:] != 0, axis=1)
        self.active = None if used.all() else torch.as_tensor(np.flatnonzero(used), device=device)
        self.d = d
        self.bias = torch.as_tensor(M[0].copy(), device=device)
        self.M_T = torch.as_tensor(M[1:][used].copy(), device=device)  # (k_active, d + cols [+ 1])
        self.completion = None
        if comp is not None:
            m, width = comp["idx"].shape
            rows = np.repeat(np.arange(m), width + 1)
            cols = np.hstack([d + comp["idx"], np.full((m, 1), d + self.cols)]).reshape(-1)
            vals = np.hstack([-comp["coef"], comp["h0"][:, None]]).reshape(-1)
            keep = vals != 0
            S = sp.csr_matrix((vals[keep], (rows[keep], cols[keep])), shape=(m, M.shape[1]))
            # and [the non-slack columns; the slacks] in one product, for one row (no concatenation)
            S_all = sp.vstack([sp.eye(self.cols, M.shape[1], k=d), S], format="csr")
            self.completion, self.completion_all = _csr(S, device), _csr(S_all, device)
            # the same completion as a gather, for blocks of rows: h0 - sum_l coef_l (P x)_K[idx_l], written
            # straight into P x (no transposes, no concatenation: 15 % of a 4096-row call at 200 buses)
            self.gather = tuple(torch.as_tensor(comp[key], device=device) for key in ("idx", "coef", "h0"))
        self.N_T = Nt.T.contiguous()  # (d, n)
        if self.direct_rule:
            F_t = torch.as_tensor(F, device=device)
            self.rule_bias, self.rule_T = F_t[:, 0].contiguous(), F_t[:, 1:].T.contiguous()  # (n,), (k, n)

        # --- the layer's guard and domain check, as constants (the same floats as FeasibilityLayer._guard) ---
        unit = torch.finfo(out_dtype).eps + torch.finfo(work).eps
        self.guard_unit = layer.rounding_guard * unit
        # a float for constant H; None for H(x): the layer's per-instance bound, computed per call
        self.guard_scale = None if self.direct_rule else (layer.rounding_guard * unit) * slacks.row_norm(None)
        self.support = slacks.cols
        # Slacks that are entries of y (the standard form's H = [0, -I], h = 0) are finite when y is.
        self.slack_sum = not (slacks.mode == "select" and slacks.coef == -1.0 and not slacks.has_rhs)
        self.tiny = torch.finfo(work).tiny
        like = torch.empty(0, dtype=out_dtype, device=device)
        name = str(out_dtype).removeprefix("torch.")
        self.lo, self.hi = layer.box.get((f"lo_{name}", f"hi_{name}"), like)
        # the widest float64 row block: y (n), or the inequality form's gathered slack entries (~2 per row)
        width = max(self.n, 2 * family.m_ineq if slacks.mode == "gather" else family.m_ineq)
        self.chunk_rows = max(64, CHUNK_BYTES // (8 * width)) if chunk_rows is None else max(1, int(chunk_rows))
        self._last: tuple | None = None
        self._row_setup(comp, slacks, layer, family, ROW_MODE if row_mode is None else row_mode)
        self._chunk_setup(BATCH_MODE if batch_mode is None else batch_mode)

    def _row_setup(self, comp, slacks, layer, family, mode: str) -> None:
        """The batch-1 path (:func:`_row_task`, :func:`_row_blend`) where the structure is the standard form's
        (slack completion, slacks ``y[:, s0:s1]``, ``h = 0``, float64 output); else None (the general path).
        A mode whose compiler fails here falls back to eager, with a warning naming the error."""
        self._row = self._row_args = None
        if mode not in ROW_MODES:
            raise ValueError(f"row_mode must be one of {ROW_MODES}; got {mode!r}")
        simple = (comp is not None and slacks.mode == "select" and slacks.coef == -1.0 and not slacks.has_rhs
                  and slacks.start >= 0 and family.m_ineq > 0 and self.out_dtype == torch.float64)  # fmt: skip
        if not simple:
            return
        fns = _ROW_CACHE.get(mode) if mode != "off" else None
        if fns is None and mode != "off":
            try:
                fns = _row_functions(mode)
            except Exception as err:  # noqa: BLE001 - a missing compiler is not fatal: eager is the same arithmetic
                msg = f"fused batch-1 path: row_mode={mode!r} unavailable ({type(err).__name__}: {err}); using eager"
                log.warning(msg)
                warnings.warn(msg, stacklevel=3)
                fns = _row_functions("eager")
            _ROW_CACHE[mode] = fns
        device = self.M_T.device
        active = self.active if self.active is not None else torch.arange(self.k, device=device)
        idx = torch.as_tensor(comp["idx"], device=device)
        coef = torch.as_tensor(comp["coef"], device=device)
        h0 = torch.as_tensor(comp["h0"], device=device)
        Ws, bs = [W for W, _ in self.hidden], [b for _, b in self.hidden]
        s0, s1 = int(slacks.start), int(slacks.stop)
        guard = float(self.guard_scale) if self.guard_unit > 0 else 0.0
        self._row_args = (  # also the block path's (_chunk_setup)
            (Ws, bs, self.A_T, self.a, active, self.bias, self.M_T, idx, coef, h0, self.N_T, self.d, self.cols, s0, s1),
            (self.N_T, s0, s1, int(self.support[0]), int(self.support[1]), guard, float(self.tiny), float(layer.alpha_margin)),
        )
        self._row = None if mode == "off" else (fns, *self._row_args)
        self.row_mode = mode

    def _chunk_setup(self, mode: str) -> None:
        """The block path (:func:`_chunk_task`, :func:`_chunk_blend`) where the batch-1 path applies (the same
        structure); else None (:meth:`_rows`)."""
        if mode not in BATCH_MODES:
            raise ValueError(f"batch_mode must be one of {BATCH_MODES}; got {mode!r}")
        self._chunk, self.batch_mode = None, "off"
        if mode == "off" or self._row_args is None:
            return
        if mode not in _BATCH_CACHE:
            try:
                _BATCH_CACHE[mode] = _chunk_functions(mode)
            except Exception as err:  # noqa: BLE001 - e.g. torch.compile unsupported here: eager is the same arithmetic
                msg = f"fused block path: batch_mode={mode!r} unavailable ({type(err).__name__}: {err}); using eager"
                log.warning(msg)
                warnings.warn(msg, stacklevel=3)
                _BATCH_CACHE[mode] = _chunk_functions("eager")
        self._chunk = (mode, *self._row_args)
        self.batch_mode = mode

    def _chunk_call(self, which: int, *args):
        """Call the block mode's task (0) or blend (1); a compiler that fails (at the first call of a shape: no
        C++ compiler, an inductor error) is reported once and replaced by the eager functions for the process
        (the same arithmetic: the outputs differ by rounding only, see the module docstring)."""
        mode = self._chunk[0]
        try:
            return _BATCH_CACHE[mode][which](*args)
        except Exception as err:  # noqa: BLE001 - a missing compiler is not fatal: eager is the same arithmetic
            if _BATCH_CACHE[mode] is _BATCH_CACHE.setdefault("eager", _chunk_functions("eager")):
                raise
            first = str(err).strip().splitlines()[:2]  # inductor's messages run over many lines
            msg = f"fused block path: batch_mode={mode!r} failed ({type(err).__name__}: {' '.join(first)}); using eager"
            log.warning(msg)
            warnings.warn(msg, stacklevel=4)
            _BATCH_CACHE[mode] = _BATCH_CACHE["eager"]
            return _BATCH_CACHE[mode][which](*args)

    def _chunk_rows(self, xi: torch.Tensor, xl: torch.Tensor, xw: torch.Tensor, out: torch.Tensor | None) -> tuple:
        """One chunk by the block path: ``(y, alpha, key)`` as :meth:`_rows`; a chunk with a row that is not
        finite takes :meth:`_blend` (its NaN and ``alpha = 1`` rows), as :meth:`_rows` does."""
        _, task_args, blend_args = self._chunk
        B = xi.shape[0]
        y = xw.new_empty(B, self.n) if out is None else out
        px, w, key = self._chunk_call(0, _to(xi, self.net_dtype), xw, *task_args, y)
        ok = (key >= 0) & (key != math.inf)
        n_ok = int(ok.sum())
        if n_ok == B:
            return y, y.new_zeros(B), key
        if not bool(torch.isfinite(key).all()):
            return (*self._blend(xl, xw, y, px, w, None, ok if n_ok else None, key), key)
        alpha = self._chunk_call(1, y, px, w, ok, *blend_args)
        return y, alpha, key

    def _one_row(self, xi: torch.Tensor, xw: torch.Tensor) -> tuple | None:
        """``(y, alpha, key)`` of one row by the batch-1 path, or None where the row is not finite (the general
        path then handles it, as every other case)."""
        (task, blend), task_args, blend_args = self._row
        y_tn, px, w, key = task(_to(xi, self.net_dtype), xw, *task_args)
        v = key.item()
        if v >= 0 and v != math.inf:
            return y_tn, y_tn.new_zeros(1), key
        if not math.isfinite(v):
            return None
        y, alpha = blend(y_tn, px, w, *blend_args)
        return y, alpha, key

    def extra_repr(self) -> str:
        k_active = self.k if self.active is None else int(self.active.numel())
        form = "slack completion" if self.completion is not None else "dense"
        return f"n={self.n}, d={self.d}, P x on {self.cols} columns ({form}), active inputs={k_active}/{self.k}"

    # --- pieces ------------------------------------------------------------------------------------------
    def task_coordinates(self, xi: torch.Tensor) -> torch.Tensor:
        """``(B, k) -> u = N' y_task: (B, d)`` in float64, the task network's output in null coordinates."""
        z = _to(xi, self.net_dtype)
        for W, b in self.hidden:
            z = torch.nn.functional.linear(z, W, b).relu_()
        return _to(torch.addmm(self.a, z, self.A_T), self.work)

    def affine_part(self, xw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B, k) -> (w = N' F x: (B, d), P x: (B, n))``, float64."""
        xa = xw if self.active is None else xw.index_select(1, self.active)
        wp = torch.addmm(self.bias, xa, self.M_T)
        if self.completion is None:
            return wp[:, : self.d], wp[:, self.d :]
        if wp.shape[0] == 1:
            return wp[:, : self.d], (self.completion_all @ wp.T).T
        idx, coef, h0 = self.gather
        pk = wp[:, self.d : self.d + self.cols]
        px = wp.new_empty(wp.shape[0], self.n)
        px[:, : self.cols] = pk
        torch.sub(h0, (pk[:, idx] * coef).sum(dim=2), out=px[:, self.cols :])  # the slacks' columns of P x
        return wp[:, : self.d], px

    def safe_output(self, xw: torch.Tensor, px: torch.Tensor, w: torch.Tensor, reuse: bool = False) -> torch.Tensor:
        """``(B, n)``: the rule projected onto the equalities, ``P x + N w`` (the rule itself for an ``H(x)``).
        ``reuse``: ``px`` is a temporary no longer needed, overwritten in place (saves a (B, n) copy)."""
        if self.direct_rule:
            return torch.addmm(self.rule_bias, xw, self.rule_T)
        return px.addmm_(w, self.N_T) if reuse else torch.addmm(px, w, self.N_T)

    def _inside(self, xl: torch.Tensor) -> bool:
        """Every input inside the (widened) box: a min and a max over the batch (NaN propagates, so it fails) and
        one sync; the flags only when one is not. (A clamp with tensor bounds was ~40x slower at batch 4096.)"""
        if xl.shape[0] == 1:
            return torch.equal(xl.clamp(self.lo, self.hi), xl)
        lo, hi = torch.aminmax(xl, dim=0)
        return bool(((lo >= self.lo) & (hi <= self.hi)).all())

    def domain_flags(self, xl: torch.Tensor) -> torch.Tensor:
        """``(B, k) -> (B,)``: outside the box (or NaN), exactly as :meth:`FeasibilityLayer.domain_flags`."""
        return ~(xl.clamp(self.lo, self.hi) == xl).all(dim=1)

    # --- the layer -----------------------------------------------------------------------------------------
    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k) -> y: (B, n)`` in ``out_dtype``; ``last_stats`` as the layer's.

        Large batches run in chunks of ``chunk_rows`` rows: every step is row-wise, and a chunk's float64
        temporaries stay in cache (one pass over a 4096 x 1527 float64 array costs more than the matmuls)."""
        if xi.dim() != 2 or xi.shape[1] != self.k:
            raise ValueError(f"expected xi (B, {self.k}); got {tuple(xi.shape)}")
        layer, B, step = self._layer[0], xi.shape[0], self.chunk_rows
        xl = _to(xi, self.out_dtype)  # what the unfused layer sees
        xw = _to(xl, self.work)
        row = self._one_row(xi, xw) if B == 1 and self._row is not None else None
        if row is not None:
            y, alpha, key = row
        elif B <= step:
            y, alpha, key = self._rows(xi, xl, xw)
            y = _to(y, self.out_dtype)
        else:  # each chunk writes its rows of y in place where the dtypes allow
            y = xw.new_empty(B, self.n, dtype=self.out_dtype)
            alpha, key = xw.new_empty(B), xw.new_empty(B)
            direct = self.out_dtype == self.work
            for lo in range(0, B, step):
                hi = min(lo + step, B)
                out = y[lo:hi] if direct else None
                y_c, alpha[lo:hi], key[lo:hi] = self._rows(xi[lo:hi], xl[lo:hi], xw[lo:hi], out)
                if out is None or y_c.data_ptr() != out.data_ptr():
                    y[lo:hi] = y_c
        ood: torch.Tensor | bool | None = None  # flags, True (all inside, checked), or None (not checked)
        if layer.out_of_domain != "count":
            ood = self._inside(xl) or self.domain_flags(xl)
            if ood is not True:
                msg = f"{int(ood.sum())} of {ood.numel()} inputs lie outside the box: feasibility is not guaranteed"
                if layer.out_of_domain == "error":
                    raise ValueError(msg + " (out_of_domain='error'; use 'warn' or 'count' to let them through)")
                warnings.warn(msg, stacklevel=2)
        self._last = (xl, xw, alpha, key, ood)
        return y

    def _rows(self, xi: torch.Tensor, xl: torch.Tensor, xw: torch.Tensor, out: torch.Tensor | None = None) -> tuple:
        """One chunk: ``(y, alpha, key)``, ``y`` in the working dtype (written into ``out`` when given); ``key``
        is not finite (NaN or inf) for rows whose ``y_TN`` or slacks are not finite (as the layer: a row sum is
        finite iff every entry is), else their smallest slack."""
        if self._chunk is not None and xi.shape[0] > 1:
            return self._chunk_rows(xi, xl, xw, out)
        u = self.task_coordinates(xi)
        w, px = self.affine_part(xw)
        y_tn = torch.addmm(px, u, self.N_T) if out is None else torch.addmm(px, u, self.N_T, out=out)
        if self.out_dtype != self.work:
            # The output dtype's values (what the unfused layer projects in): a row left alone (alpha = 0) is
            # returned as is, so its slacks must be those of the rounded vector, not of the float64 one.
            y_tn = y_tn.to(self.out_dtype).to(self.work)
        total = y_tn.sum(dim=1)
        h = self._slacks.rhs(xw, y_tn)
        s_tn = self._slacks.slack(xw, y_tn, h)
        key = s_tn.amin(dim=1).add_(total - total) if s_tn.shape[1] else total - total
        if self.slack_sum:  # H y can overflow for a finite y (as the layer: such a row is not finite)
            ssum = s_tn.sum(dim=1)
            key.add_(ssum - ssum)
        B = y_tn.shape[0]
        if B == 1:  # one sync says both whether the row moves and whether it is finite
            v = key.item()
            if v >= 0 and v != math.inf:
                return y_tn, y_tn.new_zeros(1), key
            return (*self._blend(xl, xw, y_tn, px, w, h, None, key if not math.isfinite(v) else None), key)
        ok = (key >= 0) & (key != math.inf)  # alpha = 0: finite and every slack >= 0 (NaN compares False)
        n_ok = int(ok.sum())
        if n_ok == B:
            return y_tn, y_tn.new_zeros(B), key
        bad = key if not bool(torch.isfinite(key).all()) else None
        if 2 * n_ok >= B:  # few rows move: only they compute the safe output
            rows = (~ok).nonzero().squeeze(1)
            pick = lambda t: None if t is None else t.index_select(0, rows)  # noqa: E731
            y_r, a_r = self._blend(pick(xl), pick(xw), pick(y_tn), pick(px), pick(w), pick(h), None, pick(bad))
            return y_tn.index_copy_(0, rows, y_r), y_tn.new_zeros(B).index_copy_(0, rows, a_r), key
        y, alpha = self._blend(xl, xw, y_tn, px, w, h, ok if n_ok else None, bad)
        return y, alpha, key

    def _blend(self, xl, xw, y_tn, px, w, h, ok, key) -> tuple[torch.Tensor, torch.Tensor]:
        """``(y, alpha)`` of rows that (mostly) move, by the layer's arithmetic (``FeasibilityLayer.forward``,
        ``_guard`` and ``_alpha``, op for op). ``ok``: rows that keep ``y_TN`` (None: none); ``key``: None when
        every row is finite, else the rows' keys (not finite: ``y_TN`` or its slacks are not finite)."""
        slacks, layer, buf = self._slacks, self._layer[0], y_tn  # the output overwrites y_TN's storage
        any_bad = key is not None
        if any_bad:
            finite = torch.isfinite(key)
            y_tn = torch.where(finite.unsqueeze(1), y_tn, 0.0)
        s_tn = slacks.slack(xw, y_tn, h)
        y_sn = self.safe_output(xw, px, w, reuse=True)  # px: the caller's temporary (a row pick copies it)
        s_sn = slacks.slack(xw, y_sn, h)
        if self.guard_unit > 0:
            c0, c1 = self.support
            size = _max_abs(y_tn[:, c0:c1]) + _max_abs(y_sn[:, c0:c1])
            g = self.guard_scale if self.guard_scale is not None else self.guard_unit * slacks.row_norm(xw)
            tau = g * size if h is None else g * size + self.guard_unit * _max_abs(h)
            need = tau - s_tn
        else:
            need = -s_tn
        if s_tn.shape[1]:  # the same floats as need / (s_sn - s_tn).clamp_min(tiny), in place on the temporaries
            gap = torch.sub(s_sn, s_tn).clamp_min_(self.tiny)
            alpha = need.div_(gap).amax(dim=1).clamp_(0.0, 1.0)
        else:
            alpha = need.new_zeros(need.shape[0])
        if layer.alpha_margin > 0:
            alpha = alpha + layer.alpha_margin * (1.0 - alpha)
        if ok is not None:
            alpha = alpha.masked_fill(ok, 0.0)
        if any_bad:
            alpha = alpha.masked_fill(~finite, 1.0)
        y = torch.lerp(y_tn, y_sn, alpha.unsqueeze(1), out=buf)
        if any_bad:  # as unfused: an input that is not finite gives a NaN row
            y.masked_fill_(~torch.isfinite(xl).all(dim=1, keepdim=True), math.nan)
        return y, alpha

    # --- statistics ------------------------------------------------------------------------------------------
    def stats(self, keys: tuple[str, ...] = STATS) -> dict[str, torch.Tensor]:
        """The named statistics of the last call (only those asked for are computed)."""
        if self._last is None:
            return {}
        xl, xw, alpha, key, ood = self._last
        out: dict[str, torch.Tensor] = {}
        for name in keys:
            if name == "alpha":
                out[name] = alpha
            elif name == "nonfinite":
                out[name] = ~torch.isfinite(key)
            elif name == "alpha_hit_one":
                out[name] = (alpha >= 1.0).sum()
            elif name == "out_of_domain":
                if ood is None:
                    out[name] = self.domain_flags(xl)
                else:
                    out[name] = xl.new_zeros(xl.shape[0], dtype=torch.bool) if ood is True else ood
            elif name == "safe_infeasible":
                w, px = self.affine_part(xw)
                y_sn = self.safe_output(xw, px, w)
                s_sn = self._slacks.slack(xw, y_sn, self._slacks.rhs(xw, y_sn))
                out[name] = s_sn.amin(dim=1) < 0 if s_sn.shape[1] else torch.zeros_like(alpha, dtype=torch.bool)
            else:
                raise KeyError(f"unknown statistic {name!r}; known: {STATS}")
        return out

    @property
    def last_stats(self) -> dict[str, torch.Tensor]:
        """Statistics of the last call, as :attr:`FeasibilityLayer.last_stats` (computed on access)."""
        return self.stats()


class LayerPath(nn.Module):
    """The unfused path (network, then the layer) behind :class:`FusedProposed`'s interface: what :func:`fuse`
    returns when the structure does not admit fusion (``reason`` says why)."""

    fused = False

    def __init__(self, method, reason: str) -> None:
        super().__init__()
        self._method = (method,)  # not a submodule: the method owns this object, not the other way round
        self.reason = reason

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        return self._method[0].blend(xi)  # network (slack step, refinement), layer

    def stats(self, keys: tuple[str, ...] = STATS) -> dict[str, torch.Tensor]:
        """The named statistics of the layer's last call (all of them are computed: the layer's own way)."""
        stats = self._method[0].layer.last_stats
        return {k: stats[k] for k in keys if k in stats}

    @property
    def last_stats(self) -> dict[str, torch.Tensor]:
        """As :attr:`FeasibilityLayer.last_stats`."""
        return self.stats()


_REPORTED: set[str] = set()  # the reasons already logged by fuse()


def fuse(method, rule_tol: float = RULE_TOL) -> nn.Module:
    """The inference module of a set-up :class:`~hardlinear.methods.proposed.Proposed`: a
    :class:`FusedProposed` built from its current weights, or a :class:`LayerPath` (reason logged) when the
    problem's structure does not admit one (e.g. the portfolio's input-dependent ``G(x)``).

    Both map ``xi -> y`` like ``method(xi)`` at inference and expose ``stats(keys)`` and ``last_stats``.
    """
    from hardlinear.layers.dispatch_blend import DispatchBlend, dispatch_blend_reason

    if dispatch_blend_reason(method) is None:  # the dispatch with refine=problem: its own path through the factor
        return DispatchBlend(method)
    chosen = method.unfusable_reason()  # an option of the method (a refinement): its documented path, no news
    try:
        if chosen is not None:
            raise NotFusable(chosen)
        return FusedProposed(method.problem.family, method.net, method.layer, method.layer_dtype, rule_tol)
    except NotFusable as err:
        name = f"{getattr(method.problem, 'name', '?')} ({getattr(method.problem, 'form', '?')})"
        msg = f"fused inference unavailable for {name}: {err}; using the unfused layer (same outputs, slower)"
        if msg in _REPORTED or chosen is not None:  # said once a process (rebuilt after each optimizer step); a
            log.debug(msg)                           # method option's own path (refine=dr) is not a warning at all
        else:
            _REPORTED.add(msg)
            log.warning(msg)
            warnings.warn(msg, stacklevel=2)
        return LayerPath(method, str(err))
