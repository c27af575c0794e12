"""Old import paths of modules that moved, kept working with a ``DeprecationWarning`` that names the new path.

Why: the layout change (harness/, rules/, layers/peers/, then rules/reduced/) promised that the old public import
paths keep working for a while; ``from hardlinear.results import load_records`` raised ``ModuleNotFoundError``
instead. Each old path is a two-line module calling :func:`alias`, which makes the old name *the* new module (one
module object under two names, so patching either patches both) and warns once per process.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from types import ModuleType

MOVED = {
    "hardlinear.checkpoint": "hardlinear.harness.checkpoint",
    "hardlinear.loggers": "hardlinear.harness.loggers",
    "hardlinear.overrides": "hardlinear.harness.overrides",
    "hardlinear.preflight": "hardlinear.harness.preflight",
    "hardlinear.reevaluate": "hardlinear.harness.reevaluate",
    "hardlinear.results": "hardlinear.harness.results",
    "hardlinear.schemas": "hardlinear.harness.schemas",
    "hardlinear.sweep": "hardlinear.harness.sweep",
    "hardlinear.train.network": "hardlinear.layers.network",
    "hardlinear.layers.apm": "hardlinear.layers.peers.apm",
    "hardlinear.layers.dc3": "hardlinear.layers.peers.dc3",
    "hardlinear.layers.gauge": "hardlinear.layers.peers.gauge",
    "hardlinear.layers.hardnet": "hardlinear.layers.peers.hardnet",
    "hardlinear.layers.qp_projection": "hardlinear.layers.peers.qp_projection",
    "hardlinear.layers.reduced": "hardlinear.layers.peers.reduced",
    "hardlinear.layers.rule_checks": "hardlinear.rules.checks",
    "hardlinear.layers.rule_cost": "hardlinear.rules.cost",
    "hardlinear.layers.decision_rule": "hardlinear.rules.decision_rule",
    "hardlinear.layers.robust_lp": "hardlinear.rules.robust_lp",
    "hardlinear.layers.robust_lp_reduced": "hardlinear.rules.reduced",
    "hardlinear.layers.robust_lp_sparse": "hardlinear.rules.robust_lp_sparse",
    "hardlinear.layers.robust_sdp": "hardlinear.rules.robust_sdp",
    "hardlinear.layers.sparse_elimination": "hardlinear.rules.sparse_elimination",
    "hardlinear.rules.robust_lp_reduced": "hardlinear.rules.reduced",
}
"""Old module path -> the module it became (``git log --diff-filter=R -- src/hardlinear``)."""

MOVED_NAMES = {
    "hardlinear.harness": ("hardlinear.harness.runner", (
        "run", "run_in_sweep", "problem_from_config", "resolved_dict", "provenance", "config_identity", "git_sha",
        "device_name", "cpu_model", "results_loggers",
    )),
}
"""Old module that became a package -> (the module now holding its functions, their names)."""


def alias(old: str) -> ModuleType:
    """Make ``old`` (a module being imported) the module it moved to, with a ``DeprecationWarning`` naming it."""
    new = MOVED[old]
    warnings.warn(f"{old} moved to {new}: import it from there ({old} will be removed)", DeprecationWarning,
                  stacklevel=_importer_level(old))
    module = importlib.import_module(new)
    sys.modules[old] = module  # importlib hands back what sys.modules holds after the old module ran
    return module


def moved_name(package: str, name: str) -> object:
    """``package.name`` of an old module that became a package (``from hardlinear.harness import run``), with a
    ``DeprecationWarning``; ``AttributeError`` for any other name (so submodule imports proceed as usual)."""
    home, names = MOVED_NAMES[package]
    if name not in names:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    warnings.warn(f"{package}.{name} moved to {home}.{name}: import it from there", DeprecationWarning, stacklevel=3)
    return getattr(importlib.import_module(home), name)


def _importer_level(old: str) -> int:
    """The ``stacklevel`` of the code that imported ``old``: past this module and the old module, so the warning
    points at the user's import line (and shows by default when that is ``__main__``). importlib's frames between
    are not counted: ``warnings.warn`` skips them itself."""
    level, frame = 1, sys._getframe(1)
    while frame is not None and (
        frame.f_code.co_filename.startswith("<frozen importlib") or frame.f_globals.get("__name__") in (__name__, old)
    ):
        if not frame.f_code.co_filename.startswith("<frozen importlib"):
            level += 1
        frame = frame.f_back
    return level
