"""What a stored config may instantiate: this package's own method classes, and nothing else.

Why: a checkpoint (``checkpoint.pt``) carries the run's config, and checkpoints travel between colleagues. Handing
that config to Hydra's ``instantiate`` would call whatever its ``_target_`` names (``numpy.savetxt`` writes a file,
``builtins.open(path, "w")`` truncates one). So before anything is built, the whole stored config is walked: the
one ``_target_`` allowed is ``method._target_``, and it must name a subclass of
:class:`hardlinear.methods.base.Method` defined in a module of :mod:`hardlinear.methods`. The allow-list is
discovered (every module of that package is imported and its ``Method`` subclasses collected), so a new method
is trusted by adding its module, with no list of names to keep. Then every stored option goes through the checks
``run.py`` applies to the command line (``harness.schemas.validate_stored_config``: each method's declared, typed
options, its solver's allow-list with no file or log options, the problem's case among the available ones,
bounded threads, sizes and iteration counts). The method is then built by calling the class with the stored
options (plain values), without Hydra: no interpolation is resolved and no ``_args_``, ``_partial_`` or
``_recursive_`` is honoured.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

MAX_CONFIG_DEPTH = 64
"""Deepest nesting a stored config may have (ours are under 10 levels); deeper is refused, not recursed into."""
HYDRA_RESERVED = ("_target_", "_args_", "_partial_", "_recursive_", "_convert_")


class UntrustedConfig(ValueError):
    """A stored config that names something other than this package's method classes."""


@lru_cache(maxsize=1)
def trusted_method_targets() -> dict[str, type]:
    """``{"hardlinear.methods.proposed.Proposed": Proposed, ...}``: every concrete ``Method`` subclass defined
    in a module of :mod:`hardlinear.methods` (found by walking the package, so new methods join by themselves)."""
    import hardlinear.methods as package
    from hardlinear.methods.base import Method

    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type) and issubclass(value, Method) and value is not Method
                and value.__module__ == module.__name__
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


def _walk(config: Any):
    """``(dotted path, node)`` of every mapping in ``config``, iteratively (a hostile depth cannot recurse);
    :class:`UntrustedConfig` beyond :data:`MAX_CONFIG_DEPTH`."""
    stack = [("", config, 0)]
    while stack:
        path, node, depth = stack.pop()
        if depth > MAX_CONFIG_DEPTH:
            raise UntrustedConfig(f"the stored config nests deeper than {MAX_CONFIG_DEPTH} levels (at {(path or '<root>')[:60]}...)")
        if isinstance(node, Mapping):
            yield path, node
            children = node.items()
        elif isinstance(node, (list, tuple)):
            children = enumerate(node)
        else:
            continue
        for key, child in children:
            stack.append((f"{path}.{key}" if path else str(key), child, depth + 1))


def check_stored_config(config: Any, source: str = "the checkpoint") -> type:
    """The method class a stored run config names, after checking the whole config; :class:`UntrustedConfig`
    naming the key otherwise. Nothing is imported but this package's own method modules."""
    if not isinstance(config, Mapping) or not isinstance(config.get("method"), Mapping):
        raise UntrustedConfig(f"{source}: its config has no 'method' section; it is not a hardlinear run's config")
    for path, node in _walk(config):
        reserved = [k for k in node if k in HYDRA_RESERVED]
        if not reserved:
            continue
        if path != "method" or reserved != ["_target_"]:
            where = ", ".join(f"{path + '.' if path else ''}{k}" for k in reserved)
            raise UntrustedConfig(
                f"{source}: refused to load: its config sets {where}; a saved run may name only its method class "
                "(method._target_), so this file was edited or not made by hardlinear. Nothing was built."
            )
    target = config["method"].get("_target_")
    allowed = trusted_method_targets()
    if not isinstance(target, str) or target not in allowed:
        raise UntrustedConfig(
            f"{source}: refused to load: method._target_ {target!r} is not one of hardlinear's method classes "
            f"({', '.join(sorted(allowed))}); a checkpoint may only rebuild those. Nothing was built."
        )
    return allowed[target]


def check_stored_options(config: Mapping[str, Any], source: str = "the checkpoint") -> None:
    """:class:`UntrustedConfig` listing every stored option that fails ``run.py``'s checks (nothing is built)."""
    from hardlinear.harness.schemas import ConfigError, validate_stored_config

    try:
        validate_stored_config(config)
    except ConfigError as err:
        lines = "; ".join(err.errors)
        raise UntrustedConfig(
            f"{source}: refused to load: its stored config fails the checks run.py applies: {lines}. Nothing was "
            "built; a checkpoint is data, and this one was edited or made by another version"
        ) from None


def build_method(config: Mapping[str, Any], source: str = "the checkpoint"):
    """The method a stored run config names, built from its plain options (after :func:`check_stored_config`
    and :func:`check_stored_options`)."""
    cls = check_stored_config(config, source)
    check_stored_options(config, source)
    options = {str(k): v for k, v in config["method"].items() if k != "_target_"}
    try:
        return cls(**options)
    except TypeError as err:
        raise UntrustedConfig(f"{source}: the stored method options do not fit {cls.__name__} as the code is now: {err}") from err
