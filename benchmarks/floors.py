"""The arithmetic floor of a method's forward pass: the multiply-adds per instance (by dtype) and the bytes of
constants one call must read, derived from the shapes of the set-up method.

Why: a time alone does not say whether a method is slow because it has much to compute or because it computes
badly. Beside each measured time the benchmark puts what the method cannot avoid: each constant matrix read once
per call and multiplied once per instance (per iteration, for a method that iterates). Elementwise passes
(clamps, maxima, the blend's ``lerp``) are not counted: they are memory traffic on the batch, not constants.

One small function per method class (:data:`DERIVATIONS`, keyed by the class name, so that a new method is picked
up without an if/elif elsewhere); a class without one gets :func:`generic`: the task network plus every
floating matrix buffer of the method read once per instance (per iteration), marked ``generic``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn


@dataclass
class Floor:
    """Per instance: multiply-adds by dtype; per call: bytes of constants; how it was derived."""

    macs: dict[str, float] = field(default_factory=dict)  # dtype name -> multiply-adds per instance
    const_bytes: float = 0.0
    terms: list[str] = field(default_factory=list)
    exact: bool = True  # False: a generic lower bound (constants read once), not the method's own derivation

    def add(self, what: str, macs: float, dtype: torch.dtype | str, const_numel: float = 0, itemsize: int | None = None):
        name = str(dtype).removeprefix("torch.")
        self.macs[name] = self.macs.get(name, 0.0) + float(macs)
        size = itemsize if itemsize is not None else torch.empty(0, dtype=_dtype(name)).element_size()
        self.const_bytes += float(const_numel) * size
        self.terms.append(f"{what}: {macs:,.0f} {name}")
        return self

    def merge(self, other: Floor) -> Floor:
        for k, v in other.macs.items():
            self.macs[k] = self.macs.get(k, 0.0) + v
        self.const_bytes += other.const_bytes
        self.terms += other.terms
        self.exact = self.exact and other.exact
        return self

    def describe(self) -> str:
        return "; ".join(self.terms)


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


# --- pieces -------------------------------------------------------------------------------------------------
def network(net: nn.Module, label: str = "network") -> Floor:
    """Every ``nn.Linear`` of the network: ``in x out`` multiply-adds in its dtype (batch norm and ``Standardize``
    are affine and fold into them: not counted)."""
    f = Floor()
    for i, mod in enumerate(m for m in net.modules() if isinstance(m, nn.Linear)):
        W = mod.weight
        numel = W.numel() + (mod.bias.numel() if mod.bias is not None else 0)
        f.add(f"{label} layer {i} {W.shape[1]}x{W.shape[0]}", W.numel(), W.dtype, numel, W.element_size())
    return f


def matrix(f: Floor, what: str, t: torch.Tensor | None, times: float = 1.0) -> Floor:
    """One product of the constant ``t`` with a vector per instance, ``times`` times (its bytes read once)."""
    if t is None:
        return f
    numel = t._nnz() if t.layout != torch.strided else t.numel()
    return f.add(f"{what} {tuple(t.shape)} x{times:g}", numel * times, t.dtype, numel, t.element_size())


def _buffers(module: nn.Module, skip: tuple[nn.Module, ...] = ()) -> list[tuple[str, torch.Tensor]]:
    skipped = {id(b) for m in skip for b in [*m.buffers(), *m.parameters()]}
    out = []
    for name, b in [*module.named_buffers(), *module.named_parameters()]:
        if id(b) in skipped or not b.is_floating_point() or b.dim() < 2:
            continue
        out.append((name, b))
    return out


# --- per method class -----------------------------------------------------------------------------------------
def generic(method, iterations: float) -> Floor:
    """The task network, then every floating matrix buffer outside it read once per instance (per iteration)."""
    net = getattr(method, "net", None)
    f = network(net) if isinstance(net, nn.Module) else Floor()
    times = iterations if getattr(method, "iterative", False) else 1.0
    for name, b in _buffers(method, skip=(net,) if isinstance(net, nn.Module) else ()):
        matrix(f, name, b, times)
    f.exact = False
    return f


def mlp(method, iterations: float) -> Floor:
    return network(method.net)


def network_only(method, iterations: float) -> Floor:
    """Penalty, ALM: the network's output is the prediction (in ``layer_dtype``: a cast, no product)."""
    return network(method.net)


def proposed(method, iterations: float, moved: float = 1.0) -> Floor:
    """The fused path (:mod:`hardlinear.layers.fused`): hidden layers, the last layer onto the null space
    ``(h x d)``, one ``k_active x (d + n_K + 1)`` float64 product for ``[w | P x]``, the slack completion's
    sparse product, the rank-``d`` update of ``y_TN`` and, for the rows the blend moves (``moved``, a fraction),
    that of the safe output. The unfused layer falls back to :func:`generic`."""
    from hardlinear.layers.fused import FusedProposed

    fused = method.fused_module() if getattr(method, "fused_inference", False) else None
    if not isinstance(fused, FusedProposed):
        return generic(method, iterations)
    f = Floor()
    for i, (W, b) in enumerate(fused.hidden):
        f.add(f"hidden {i} {W.shape[1]}x{W.shape[0]} (folded)", W.numel(), W.dtype, W.numel() + b.numel(), W.element_size())
    matrix(f, "last layer onto N (A_T)", fused.A_T)
    matrix(f, "[w | P x] (M_T: k_active x (d + n_K + 1))", fused.M_T)
    matrix(f, "slack completion (sparse)", fused.completion)
    matrix(f, "y_TN = P x + N u (rank d)", fused.N_T)
    f.add(f"safe output P x + N w (rank d) on {moved:.0%} of rows", moved * fused.N_T.numel(), fused.N_T.dtype)
    return f


def ldr(method, iterations: float) -> Floor:
    f = Floor()
    matrix(f, "rule F", method.rule.linear)
    quad = getattr(method.rule, "quadratic", None)
    return matrix(f, "rule quadratic part", quad if torch.is_tensor(quad) else None)


def dc3(method, iterations: float) -> Floor:
    """Network on the partial variables, the completion (once), two ``m_ineq x n_partial`` products per correction
    step (the gradient and the residual's update), ``iterations`` steps per instance (measured)."""
    f = network(method.net)
    comp = method.correction.completion
    for name in ("K", "KG", "B_eq_R"):
        matrix(f, f"completion {name}", getattr(comp, name, None))
    HP = next(iter(method.correction._HP.values()), None)
    if HP is None or HP.dim() != 2:
        f.exact = False
        return f
    return matrix(f, "correction H P (gradient and residual update)", HP, 2.0 * iterations)


def apm(method, iterations: float) -> Floor:
    """Network, the projection onto the equalities (generic: its constants once), then per iteration two products
    with the null-space basis rows of the slack block (the deficit and the step)."""
    f = network(method.net)
    corr = method.correction
    for name, b in _buffers(corr):
        matrix(f, f"projection {name}", b)
    basis = next((b for name, b in _buffers(corr) if name.endswith("basis")), None)
    if basis is not None:
        s0 = int(getattr(corr, "slack_start", 0))
        rows = basis.shape[0] - s0
        f.add(f"per iteration: deficit and step on N_S ({rows}x{basis.shape[1]}) x2 x{iterations:.1f}",
              2.0 * rows * basis.shape[1] * iterations, basis.dtype)  # fmt: skip
    else:
        f.exact = False
    return f


def reduced_layer(method, iterations: float) -> Floor:
    """HardNet-Aff and the gauge map: network on the free coordinates, then every matrix of the layer (the rule,
    the null-space basis ``N``, ``M = H N``, HardNet's pseudo-inverse) once per instance."""
    f = network(method.net)
    for name, b in _buffers(method.layer):
        matrix(f, f"layer {name}", b)
    return f


DERIVATIONS: dict[str, Callable[..., Floor]] = {
    "BareMLP": mlp,
    "Proposed": proposed,
    "LDR": ldr,
    "DC3": dc3,
    "APM": apm,
    "EAPM": apm,
    "HardNetAff": reduced_layer,
    "Gauge": reduced_layer,
    "Penalty": network_only,
    "ALM": network_only,
}


def floor(method, iterations: float = 1.0, moved: float = 1.0) -> Floor:
    """The floor of ``method`` (set up, eval mode) by its class's derivation, else :func:`generic`."""
    derive = DERIVATIONS.get(type(method).__name__, generic)
    if derive is proposed:
        return proposed(method, iterations, moved)
    return derive(method, iterations)
