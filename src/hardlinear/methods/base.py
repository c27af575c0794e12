"""What a method is: a module that turns inputs into predictions, plus what the trainer needs to fit it.

The harness calls, in order:

1. ``method.setup(problem, ctx)``: offline work (decision rule, factorisations, nothing trained); returns the
   seconds it took (``offline/time_s``).
2. If ``method.trainable``: the trainer fits the parameters of ``method`` (a ``torch.nn.Module``) with
   ``method.loss(xi, method(xi))`` on fresh inputs; ``method.pretrain_target(xi)`` gives an optional MSE
   target for the first epochs (the proposed method's safe output); ``method.supervised`` methods are fit by
   MSE to reference solutions instead (``method.solution_target``).
3. ``method.predict(xi)``: inference, the path that is timed and evaluated; returns a :class:`Prediction`
   (``y`` in the problem's form and the correction iterations per instance). A numpy array is accepted too
   (:func:`accepts_numpy`): numpy in, numpy out.

Adding a method is a module implementing this class and a config in ``conf/method/`` that instantiates it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
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
    given_rule: Any = None
    """A decision rule to verify and use instead of solving one (a checkpoint's: ``harness.checkpoint.load_run``);
    ``methods.ldr.load_rule`` checks it against the problem (``rules.checks.reverify``) and refuses one that fails."""

    def generator(self, offset: int = 0) -> torch.Generator:
        return torch.Generator().manual_seed(self.seed + offset)

    def make_mlp(self, box, n_out: int) -> nn.Module:
        """The task network every learned method uses, sized by the ``network`` settings."""
        from hardlinear.layers.network import MLP

        return MLP(box, n_out, **self.network)


@dataclass
class Prediction:
    """``y: (B, n)`` in the problem's form; ``iterations: (B,)`` correction steps (1 for one-shot methods); numpy
    arrays when ``predict`` was given one (:func:`accepts_numpy`)."""

    y: torch.Tensor
    iterations: torch.Tensor
    extras: dict = field(default_factory=dict)


DTYPES = {"float32": torch.float32, "float64": torch.float64}


def check_dtype(layer_dtype: str) -> torch.dtype:
    """The torch dtype named by a ``layer_dtype`` option, or a ValueError listing the choices."""
    if layer_dtype not in DTYPES:
        raise ValueError(f"layer_dtype must be one of {sorted(DTYPES)}; got {layer_dtype!r}")
    return DTYPES[layer_dtype]


def accepts_numpy(predict: Callable) -> Callable:
    """Let ``predict`` take a numpy array ``xi: (B, k)`` or one input ``(k,)`` as well as a tensor.

    Why: a user with numpy data got ``AttributeError: 'numpy.ndarray' object has no attribute 'to'``. A numpy input
    is read as float64 (the harness's inputs), moved to the method's device and predicted without gradients; the
    :class:`Prediction` comes back with numpy ``y: (B, n)`` and ``iterations: (B,)`` (``(n,)`` and ``()`` for one
    input), ``y`` in the dtype the method computes it (a float32 network's layer output stays float32). A tensor
    goes through untouched, so the timed path is unchanged. Every subclass's ``predict`` is wrapped
    (:meth:`Method.__init_subclass__`)."""
    if getattr(predict, "_accepts_numpy", False):
        return predict

    @functools.wraps(predict)
    def wrapper(self, xi, *args, **kwargs):
        if isinstance(xi, torch.Tensor):
            return predict(self, xi, *args, **kwargs)
        if not isinstance(xi, np.ndarray):
            raise TypeError(f"{type(self).__name__}.predict takes a torch.Tensor or a numpy array of inputs (B, k); "
                            f"got {type(xi).__name__}")
        single = xi.ndim == 1
        tensor = torch.as_tensor(np.asarray(xi, dtype=np.float64), device=_device_of(self))
        with torch.no_grad():
            pred = predict(self, tensor[None] if single else tensor, *args, **kwargs)
        y, iterations = pred.y.detach().cpu().numpy(), pred.iterations.detach().cpu().numpy()
        return Prediction(y=y[0] if single else y, iterations=iterations[0] if single else iterations, extras=pred.extras)

    wrapper._accepts_numpy = True
    return wrapper


def _device_of(module: nn.Module) -> torch.device:
    for tensor in (*module.parameters(), *module.buffers()):
        return tensor.device
    return torch.device("cpu")


class Method(nn.Module):
    """Base class of every method; subclasses override what differs."""

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "predict" in cls.__dict__:  # numpy inputs for every method's own predict
            cls.predict = accepts_numpy(cls.__dict__["predict"])

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

    def supervised_loss(self, xi: torch.Tensor, y_ref: torch.Tensor) -> torch.Tensor:
        """Loss of a batch of a ``supervised`` method, from reference solutions ``y_ref: (B, n)`` (default: the MSE
        of ``regress`` to ``solution_target``; LDF adds its multipliers' terms)."""
        pred = self.regress(xi)
        return F.mse_loss(pred, self.solution_target(y_ref).to(pred.dtype))

    @torch.no_grad()
    @accepts_numpy
    def predict(self, xi: torch.Tensor | np.ndarray) -> Prediction:
        """Inference: prediction and iterations (default: ``forward``, one iteration); numpy in, numpy out
        (:func:`accepts_numpy`)."""
        y = self(xi)
        return Prediction(y=y, iterations=torch.ones(xi.shape[0], dtype=torch.long, device=y.device))

    def after_epoch(self, epoch: int) -> dict[str, float]:
        """Hook for methods that update state between epochs (ALM multipliers); returns values to log."""
        return {}

    def describe(self) -> dict[str, str]:
        """Extra identity columns of the results row (e.g. ``variant`` = the solver)."""
        return {"variant": ""}
