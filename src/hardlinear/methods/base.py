"""What a method is: a module that turns inputs into predictions, plus what the trainer needs to fit it.

The harness calls, in order:

1. ``method.setup(problem, ctx)``: offline work (decision rule, factorisations, nothing trained); returns the
   seconds it took (``offline/time_s``).
2. If ``method.trainable``: the trainer fits the parameters of ``method`` (a ``torch.nn.Module``) with
   ``method.loss(xi, method(xi))`` on fresh inputs; ``method.pretrain_target(xi)`` gives an optional MSE
   target for the first epochs (the proposed method's safe output); ``method.supervised`` methods are fit by
   MSE to reference solutions instead (``method.solution_target``).
3. ``method.predict(xi)``: inference, the path that is timed and evaluated; returns a :class:`Prediction`
   (``y`` in the problem's form and the correction iterations per instance).

Adding a method is a module implementing this class and a config in ``conf/method/`` that instantiates it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from hardlinear.errors import NotApplicable  # noqa: F401 - re-exported: every method raises it


@dataclass
class Context:
    """What the harness hands a method at set-up: where to cache, which device and dtype, the seed."""

    cache_dir: str | None = "data/cache"  # None: nothing cached (a reload names no folder unless its caller does)
    device: str = "cpu"
    dtype: torch.dtype = torch.float32
    seed: int = 0
    progress: bool = True
    network: dict = field(default_factory=lambda: {"hidden": 256, "layers": 2, "batch_norm": True})
    extras: dict = field(default_factory=dict)

    def generator(self, offset: int = 0) -> torch.Generator:
        return torch.Generator().manual_seed(self.seed + offset)

    def make_mlp(self, box, n_out: int) -> nn.Module:
        """The task network every learned method uses, sized by the ``network`` settings."""
        from hardlinear.layers.network import MLP

        return MLP(box, n_out, **self.network)


@dataclass
class Prediction:
    """``y: (B, n)`` in the problem's form; ``iterations: (B,)`` correction steps (1 for one-shot methods)."""

    y: torch.Tensor
    iterations: torch.Tensor
    extras: dict = field(default_factory=dict)


DTYPES = {"float32": torch.float32, "float64": torch.float64}


def check_dtype(layer_dtype: str) -> torch.dtype:
    """The torch dtype named by a ``layer_dtype`` option, or a ValueError listing the choices."""
    if layer_dtype not in DTYPES:
        raise ValueError(f"layer_dtype must be one of {sorted(DTYPES)}; got {layer_dtype!r}")
    return DTYPES[layer_dtype]


class Method(nn.Module):
    """Base class of every method; subclasses override what differs."""

    name: str = "method"
    trainable: bool = True  # has parameters the trainer fits
    supervised: bool = False  # fit by MSE to reference solutions rather than by the objective
    iterative: bool = False  # reports correction iterations
    batched: bool = True  # predict handles a batch at once (else throughput = 1 / time per instance)

    def __init__(self) -> None:
        super().__init__()
        self.problem = None

    def setup(self, problem, ctx: Context) -> float:
        """Offline work; returns its wall time in seconds."""
        self.problem = problem
        return 0.0

    def forward(self, xi: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        """``xi: (B, k) -> y: (B, n)``, differentiable; what the training loss sees."""
        raise NotImplementedError

    def loss(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Training loss of a batch (default: mean objective)."""
        return self.problem.objective(xi, y).mean()

    def pretrain_target(self, xi: torch.Tensor) -> torch.Tensor | None:
        """Target of the MSE pre-training epochs, or None for no pre-training."""
        return None

    def solution_target(self, y_ref: torch.Tensor) -> torch.Tensor:
        """What supervised fitting regresses ``regress(xi)`` on, from reference solutions ``(B, n)`` (default: all
        of them)."""
        return y_ref

    def regress(self, xi: torch.Tensor) -> torch.Tensor:
        """What the MSE of pre-training or of supervised fitting is taken on (default: ``forward``)."""
        return self(xi)

    @torch.no_grad()
    def predict(self, xi: torch.Tensor) -> Prediction:
        """Inference: prediction and iterations (default: ``forward``, one iteration)."""
        y = self(xi)
        return Prediction(y=y, iterations=torch.ones(xi.shape[0], dtype=torch.long, device=y.device))

    def after_epoch(self, epoch: int) -> dict[str, float]:
        """Hook for methods that update state between epochs (ALM multipliers); returns values to log."""
        return {}

    def describe(self) -> dict[str, str]:
        """Extra identity columns of the results row (e.g. ``variant`` = the solver)."""
        return {"variant": ""}
