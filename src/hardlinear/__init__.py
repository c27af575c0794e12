"""HardLinear: neural networks whose outputs satisfy hard linear constraints, and a harness to compare them.

The public names load on first use, so that ``import hardlinear`` stays light and loads neither numpy nor torch
(``hardlinear.runtime.threads`` must size the native thread pools before they start): ``hardlinear.load_run`` and
``hardlinear.export`` (:mod:`hardlinear.harness.checkpoint`), ``hardlinear.LinearConstraints`` and
``hardlinear.feasibility_layer`` (:mod:`hardlinear.api`).
"""

from typing import Any

from hardlinear._moved import install as _install_old_paths

_install_old_paths()  # old import paths of moved modules, with a DeprecationWarning (hardlinear._moved)

__version__ = "0.1.0"

_LAZY = {"export": "harness.checkpoint", "load_run": "harness.checkpoint", "LinearConstraints": "api", "feasibility_layer": "api"}

__all__ = ["LinearConstraints", "export", "feasibility_layer", "load_run"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"hardlinear.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'hardlinear' has no attribute {name!r}")
