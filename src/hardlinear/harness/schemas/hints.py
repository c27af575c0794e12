"""Type annotations as the validation uses them: read from the code a key configures (a constructor's
signature, a dataclass's fields), matched against a plain config value, and said in words in an error message
(``float | None`` -> ``a number or null``)."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from typing import Any, Literal, Union, get_args, get_origin


def _signature_hints(func: Callable, skip: Sequence[str] = ()) -> dict[str, Any]:
    """Named parameters of ``func`` -> their annotation (``Any`` where it cannot be evaluated)."""
    try:
        resolved = typing.get_type_hints(func)
    except Exception:  # noqa: BLE001 - an annotation that does not evaluate is simply not type-checked
        resolved = {}
    out = {}
    for name, p in inspect.signature(func).parameters.items():
        if name in skip or p.kind in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL):
            continue
        out[name] = resolved.get(name, Any)
    return out


def _dataclass_hints(cls: type) -> dict[str, Any]:
    try:
        resolved = typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001
        resolved = {}
    return {f.name: resolved.get(f.name, Any) for f in fields(cls)}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_union(hint: Any) -> bool:
    return get_origin(hint) in (Union, types.UnionType)


_SEQUENCES = (list, tuple, Sequence)


def _matches(value: Any, hint: Any) -> bool:
    """Whether a plain config value fits an annotation; hints this does not know (classes, tensors) pass."""
    if hint is Any:
        return True
    if hint is type(None) or hint is None:
        return value is None
    origin = get_origin(hint)
    if _is_union(hint):
        return any(_matches(value, arm) for arm in get_args(hint))
    if origin is Literal:
        return any(value == c and type(value) is type(c) for c in get_args(hint))
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return _is_number(value)
    if hint is str:
        return isinstance(value, str)
    if hint in _SEQUENCES or origin in _SEQUENCES:
        if not isinstance(value, (list, tuple)):
            return False
        args = [a for a in get_args(hint) if a is not Ellipsis]
        return not args or all(_matches(v, args[0]) for v in value)
    if hint in (dict, Mapping) or origin in (dict, Mapping):
        return isinstance(value, dict)
    return True


def _describe(hint: Any) -> str:
    """``float | None`` -> ``a number or null``: the expected type as the message says it."""
    if _is_union(hint):
        return " or ".join(dict.fromkeys(_describe(a) for a in get_args(hint)))
    if hint is type(None) or hint is None:
        return "null"
    origin = get_origin(hint)
    if origin is Literal:
        return f"one of {_join(get_args(hint))}"
    names = {
        bool: "a bool (true or false)",
        int: "an int",
        float: "a number",
        str: "a string",
        dict: "a mapping",
        Mapping: "a mapping",
    }
    if hint in names:
        return names[hint]
    if hint in _SEQUENCES or origin in _SEQUENCES:
        args = [a for a in get_args(hint) if a is not Ellipsis]
        return f"a list of {_plural(args[0])}" if args else "a list"
    if origin in (dict, Mapping):
        return "a mapping"
    return getattr(hint, "__name__", str(hint))


def _plural(hint: Any) -> str:
    return {bool: "bools", int: "ints", float: "numbers", str: "strings"}.get(hint, _describe(hint))


def _show(value: Any) -> str:
    """A value as the config spells it (``null``, ``true``), else its repr."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return repr(value)


def _type_name(value: Any) -> str:
    return {dict: "mapping", list: "list"}.get(type(value), type(value).__name__)


def _join(choices: Sequence[Any]) -> str:
    return ", ".join(str(c) for c in choices)
