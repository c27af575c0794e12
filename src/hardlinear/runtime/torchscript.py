"""TorchScript for the few inner loops that run faster under its interpreter, without its deprecation warning.

Why: torch deprecates TorchScript (``torch.jit.script`` warns from torch 2.13; ``torch.export`` is its successor for
saved programs, :func:`hardlinear.export` uses it). The Douglas-Rachford, DC3 and FSNet loops and the fused path's
batch-1 functions are scripted only because the interpreter issues their kernels faster than Python (0.72 against
1.14 ms for 100 Douglas-Rachford iterations at batch 1): an implementation detail with a Python fallback, not an
API this package offers, so its deprecation is no news for a user who reloads a model. :func:`script` filters that one
warning and falls back to the Python function, saying so once, where TorchScript is gone or rejects the function.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

DEPRECATION = r".*torch\.jit\.(script|trace).* is deprecated.*"
"""The message torch's deprecation warning of TorchScript matches (``torch/jit/_script.py``, ``_trace.py``)."""


def script(fn: Callable[..., Any], what: str) -> Callable[..., Any]:
    """``torch.jit.script(fn)`` with torch's deprecation warning of TorchScript filtered; ``fn`` itself (with one
    warning naming ``what`` runs in Python) where TorchScript is unavailable."""
    import torch

    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=DEPRECATION)
            return torch.jit.script(fn)
    except Exception as exc:  # noqa: BLE001 - a torch without TorchScript, or one that rejects the function
        warnings.warn(f"TorchScript unavailable ({type(exc).__name__}: {exc}); {what} runs in Python (the same "
                      "results, slower at small batches)", stacklevel=2)
        return fn
