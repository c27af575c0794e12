"""Old import paths of modules that moved, kept working through one import hook, with a ``DeprecationWarning``
that names the new path.

Why: the layout changes (harness/, rules/, layers/peers/, then the root's helpers into the constraints, runtime and
evaluation wings) promised that the old import paths keep working for a while. One finder on ``sys.meta_path``
(installed by ``import hardlinear``) answers for every old module path, so no file stands in the tree only to
re-export another: importing an old path hands back *the* new module (one module object under two names, so
patching either patches both) and warns once per process. Names of an old module that became a package
(``from hardlinear.constraints import ConstraintFamily``) resolve through :func:`moved_name`, which the package's
``__getattr__`` calls.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
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
    # the root's helpers, each into the wing it serves
    "hardlinear.signed_rows": "hardlinear.constraints.signed_rows",
    "hardlinear.arrays": "hardlinear.constraints.arrays",
    "hardlinear.polytope": "hardlinear.constraints.polytope",
    "hardlinear.moments": "hardlinear.constraints.moments",
    "hardlinear.user_constraints": "hardlinear.problems.user",
    "hardlinear.sparse_products": "hardlinear.rules.sparse_products",
    "hardlinear.atomic": "hardlinear.runtime.atomic",
    "hardlinear.threads": "hardlinear.runtime.threads",
    "hardlinear.allocator": "hardlinear.runtime.allocator",
    "hardlinear.extras": "hardlinear.runtime.extras",
    "hardlinear.metrics": "hardlinear.evaluation.metrics",
    "hardlinear.audit": "hardlinear.evaluation.audit",
    "hardlinear.data": "hardlinear.problems.datasets",
}
"""Old module path -> the module it became (``git log --diff-filter=R -- src/hardlinear``)."""

MOVED_NAMES = {
    "hardlinear.harness": ("hardlinear.harness.runner", (
        "run", "run_in_sweep", "problem_from_config", "resolved_dict", "provenance", "config_identity", "git_sha",
        "device_name", "cpu_model", "results_loggers",
    )),
    "hardlinear.constraints": ("hardlinear.constraints.family", (
        "ConstraintFamily", "DENSE_LIMIT", "InputBox", "InputDependentFamily", "JointlyLinearFamily",
        "SPLIT_FLOATS_PER_NONZERO", "SPLIT_LONG_ABOVE", "constant_variable_bounds", "lift", "sparse_coo",
        "standard_form",
    )),
    "hardlinear.evaluation": ("hardlinear.evaluation.protocol", (
        "DIVERGENCE_METRICS", "EvalConfig", "divergence_reason", "evaluate_method", "throughput", "time_batch1",
    )),
}
"""Old module that became a package -> (the module now holding its names, those names)."""


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds every old path of :data:`MOVED` and loads it as the new module, warning where the user imported it."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        old, new = spec.name, MOVED[spec.name]
        warnings.warn(f"{old} moved to {new}: import it from there ({old} will be removed)", DeprecationWarning,
                      stacklevel=_importer_level())
        return importlib.import_module(new)  # importlib keeps the module's own __spec__ and __name__ (no override)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the new module ran when it was imported."""


FINDER = MovedModuleFinder()


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (``import hardlinear`` calls it)."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(FINDER)


def moved_name(package: str, name: str) -> object:
    """``package.name`` of an old module that became a package (``from hardlinear.harness import run``), with a
    ``DeprecationWarning``; ``AttributeError`` for any other name (so submodule imports proceed as usual)."""
    home, names = MOVED_NAMES[package]
    if name not in names:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    warnings.warn(f"{package}.{name} moved to {home}.{name}: import it from there", DeprecationWarning, stacklevel=3)
    return getattr(importlib.import_module(home), name)


def _importer_level() -> int:
    """The ``stacklevel`` of the code that imported the old path: past this module and importlib's frames, so the
    warning points at the user's import line (and shows by default when that is ``__main__``). ``warnings.warn``
    itself skips importlib's frames, so only this module's own frames are counted."""
    level, frame = 1, sys._getframe(1)
    while frame is not None and (
        frame.f_code.co_filename.startswith("<frozen importlib") or frame.f_globals.get("__name__") == __name__
    ):
        if not frame.f_code.co_filename.startswith("<frozen importlib"):
            level += 1
        frame = frame.f_back
    return level
