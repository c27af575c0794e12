"""Optional dependencies: ``pip install hardlinear`` is the library alone; the rest comes with an extra.

A module that needs a package outside the core imports it through :func:`require`, at the point of use, so that
``import hardlinear``, the layer and one's own constraints never load it, and a missing one fails with the
``pip install`` line that brings it rather than a bare ``ModuleNotFoundError``.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType


class MissingExtra(ImportError):
    """An optional package is not installed; the message names the extra that installs it."""


def install_hint(extra: str) -> str:
    """The command that installs ``extra``."""
    return f"pip install 'hardlinear[{extra}]'"


def require(module: str, *, extra: str, purpose: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtra` saying what needed it and which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        package = module.split(".")[0]
        raise MissingExtra(f"{purpose} needs the package {package!r}, which is not installed: {install_hint(extra)}") from err


def check_installed(modules: tuple[str, ...], *, extra: str, purpose: str) -> None:
    """Raise :class:`MissingExtra` if any of ``modules`` is absent, without importing them."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtra(f"{purpose} needs {', '.join(map(repr, missing))}, not installed: {install_hint(extra)}")
