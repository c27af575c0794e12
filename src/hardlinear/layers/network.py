"""The paper's task network: an MLP on standardised inputs (2 x 256, ReLU, batch normalisation)."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from hardlinear.constraints.family import InputBox


class Standardize(nn.Module):
    """Maps inputs drawn uniformly from the box to zero mean and unit variance (a fixed, not learnt, map)."""

    def __init__(self, box: InputBox) -> None:
        super().__init__()
        std = (box.hi - box.lo) / math.sqrt(12.0)
        std = np.where(std > 0, std, 1.0)
        self.register_buffer("mean", torch.as_tensor(box.mid, dtype=torch.float32))
        self.register_buffer("inv_std", torch.as_tensor(1.0 / std, dtype=torch.float32))

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        return (xi - self.mean) * self.inv_std


ACTIVATIONS = {"relu": nn.ReLU, "silu": nn.SiLU}
INITS = ("torch", "lecun_normal")
# flax's lecun_normal: a normal truncated at 2 standard deviations, rescaled so that the variance is 1 / fan_in
_TRUNC_STD = 0.87962566103423978


def lecun_normal_(linear: nn.Linear) -> None:
    """Flax ``Dense``'s default initialisation (weights lecun_normal, bias 0), to reproduce a flax peer's runs."""
    std = 1.0 / math.sqrt(linear.in_features) / _TRUNC_STD
    with torch.no_grad():
        nn.init.trunc_normal_(linear.weight, std=std, a=-2 * std, b=2 * std)
        linear.bias.zero_()


class MLP(nn.Module):
    """``xi: (B, k) -> (B, n_out)``: standardise, ``layers`` x (Linear, BatchNorm, ReLU, Dropout), Linear.

    ``dropout`` (0: none, the paper's network) and ``standardize=False`` are there to match DC3's network
    (dropout 0.2 after every hidden layer, raw inputs); ``activation="silu"`` to match FSNet's; ``init="lecun_normal"``
    flax's default initialisation (Pinet's network), ``"torch"`` torch's own."""

    def __init__(
        self, box: InputBox, n_out: int, hidden: int = 256, layers: int = 2, batch_norm: bool = True,
        dropout: float = 0.0, standardize: bool = True, activation: str = "relu", init: str = "torch",
    ) -> None:
        super().__init__()
        if hidden < 1 or layers < 0 or n_out < 1:
            raise ValueError(f"need hidden >= 1, layers >= 0, n_out >= 1; got {hidden}, {layers}, {n_out}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1); got {dropout}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}; got {activation!r}")
        if init not in INITS:
            raise ValueError(f"init must be one of {INITS}; got {init!r}")
        blocks: list[nn.Module] = [Standardize(box)] if standardize else []
        width = box.k
        for _ in range(layers):
            blocks.append(nn.Linear(width, hidden))
            if batch_norm:
                blocks.append(nn.BatchNorm1d(hidden))
            blocks.append(ACTIVATIONS[activation]())
            if dropout > 0:
                blocks.append(nn.Dropout(p=dropout))
            width = hidden
        blocks.append(nn.Linear(width, n_out))
        self.net = nn.Sequential(*blocks)
        if init == "lecun_normal":
            for block in blocks:
                if isinstance(block, nn.Linear):
                    lecun_normal_(block)

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        return self.net(xi)


class OutputAffine(nn.Module):
    """``offset + scale * z``: the last linear layer's outputs in units of each variable's range (``method.output_scale``).

    Why: a dispatch's generators span 0.1 to 6 p.u.; one step of Adam moves every output by about the same amount,
    too much for the small units and too little for the large ones. Scaled by its half-range about its midpoint,
    each output moves in proportion to its own box, as E2ELR's sigmoid does for its bound repair (on
    ``ed`` case118, seed 0: 0.79 % mean gap -> 0.65 %; docs/peer_methods.md). Folded into the last linear layer by
    the fused path."""

    def __init__(self, lo: np.ndarray, hi: np.ndarray) -> None:
        super().__init__()
        lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
        if lo.shape != hi.shape or lo.ndim != 1 or bool(np.any(lo > hi)):
            raise ValueError(f"need 1-d lower and upper bounds of one length with lo <= hi; got shapes {lo.shape}, {hi.shape}")
        finite = np.isfinite(lo) & np.isfinite(hi)
        ranged = finite & (hi > lo)
        lo_f, hi_f = np.where(finite, lo, 0.0), np.where(finite, hi, 0.0)
        offset, scale = 0.5 * (lo_f + hi_f), np.where(ranged, 0.5 * (hi_f - lo_f), 1.0)
        self.register_buffer("offset", torch.as_tensor(offset, dtype=torch.float32))
        self.register_buffer("scale", torch.as_tensor(scale, dtype=torch.float32))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.offset + self.scale * z


def scale_outputs(net: MLP, lo: np.ndarray, hi: np.ndarray) -> MLP:
    """``net`` with an :class:`OutputAffine` after its last layer (in place; returned for chaining)."""
    affine = OutputAffine(lo, hi)
    if affine.offset.shape[0] != net.net[-1].out_features:
        raise ValueError(f"{affine.offset.shape[0]} bounds for a network of {net.net[-1].out_features} outputs")
    ref = net.net[-1].weight
    net.net.append(affine.to(ref.device, ref.dtype))
    return net


def run_net(net: torch.nn.Module, xi: torch.Tensor) -> torch.Tensor:
    """``net(xi)`` with ``xi`` cast to the network's dtype: callers may pass float64 inputs, so that the layers
    after the network enforce the constraints of the exact input rather than of its float32 rounding."""
    return net(xi.to(next(net.parameters()).dtype))


def run_net_columns(net: torch.nn.Module, xi: torch.Tensor, columns: slice) -> torch.Tensor:
    """``run_net(net, xi)[:, columns]`` computing only those outputs of the last linear layer (and of an
    :class:`OutputAffine` after it): the dispatch's path reads the generator outputs alone of a network that predicts
    every variable of the form, its thermal slacks included (at case9241 1,445 of 17,494 outputs: the rest was 60 %
    of the network's batch-1 time). The same values and, in training, the same gradients (the other outputs had
    none). Any other network: the full forward, then the columns."""
    blocks = list(net.net) if isinstance(getattr(net, "net", None), nn.Sequential) else []
    last = max((i for i, block in enumerate(blocks) if isinstance(block, nn.Linear)), default=None)
    tail = blocks[last + 1:] if last is not None else []
    if last is None or not all(isinstance(block, OutputAffine) for block in tail):
        return run_net(net, xi)[:, columns]
    h = xi.to(next(net.parameters()).dtype)
    for block in blocks[:last]:
        h = block(h)
    linear = blocks[last]
    out = torch.nn.functional.linear(h, linear.weight[columns], linear.bias[columns])
    for affine in tail:
        out = affine.offset[columns] + affine.scale[columns] * out
    return out
