"""The accumulator of a validation: :class:`_Checker` reads the config key by key and collects one error line
per problem (type, range, choice, unknown key), and :class:`ConfigError` raises them all at once."""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args, get_origin

try:
    from omegaconf import DictConfig, ListConfig
    from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException
except ImportError:  # the core install: a reload checks a stored config, plain dicts and lists, never OmegaConf nodes

    class _NoOmegaConf(Exception):
        """Stands for OmegaConf's types where it is not installed: nothing is an instance of it, nothing raises it."""

    DictConfig = ListConfig = MissingMandatoryValue = OmegaConfBaseException = _NoOmegaConf

from hardlinear.harness.schemas.hints import _describe, _is_number, _join, _matches, _show, _type_name
from hardlinear.harness.schemas.tables import OPTIONAL_TOP_LEVEL, Range


class ConfigError(ValueError):
    """A run config that cannot work; ``errors`` lists every problem found, one line each."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = list(errors)
        if len(self.errors) == 1:
            message = self.errors[0]
        else:
            message = f"{len(self.errors)} errors in the config:\n" + "\n".join(f"  - {e}" for e in self.errors)
        super().__init__(message)


_UNSET = object()  # a value that was missing or did not resolve: already reported, not checked further


class _Checker:
    """Collects error lines; each ``need_*`` returns whether the value passed, so later checks can skip it."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def error(self, message: str) -> None:
        self.errors.append(message)

    # --- reading the config: interpolations resolved key by key, so one bad key does not hide the rest ---
    def resolve(self, node: Any, key: str) -> Any:
        if isinstance(node, DictConfig):
            out = {}
            for k in node.keys():
                if not key and k in OPTIONAL_TOP_LEVEL:
                    out[str(k)] = _UNSET  # Hydra's own settings: its runtime resolvers are not ours to run
                    continue
                child_key = f"{key}.{k}" if key else str(k)
                out[str(k)] = self._child(node, k, child_key)
            return out
        if isinstance(node, ListConfig):
            return [self._child(node, i, f"{key}[{i}]") for i in range(len(node))]
        return node

    def _child(self, node: DictConfig | ListConfig, k: Any, key: str) -> Any:
        try:
            value = node[k]
        except MissingMandatoryValue:
            self.error(_missing_message(key))
            return _UNSET
        except OmegaConfBaseException as err:
            self.error(f"{key} cannot be resolved: {str(err).splitlines()[0]}")
            return _UNSET
        return self.resolve(value, key)

    # --- checks ---
    def need_type(self, key: str, value: Any, hint: Any) -> bool:
        if value is _UNSET:
            return False
        if _matches(value, hint):
            return True
        if get_origin(hint) is Literal:
            self.error(f"{key} must be one of {_join(get_args(hint))}; got {value!r}")
        else:
            kind = "" if value is None else f" ({_type_name(value)})"
            self.error(f"{key} must be {_describe(hint)}; got {_show(value)}{kind}")
        return False

    def need_range(self, key: str, value: Any, valid: Range) -> bool:
        if value is _UNSET or value is None:
            return True
        if isinstance(value, float) and not math.isfinite(value):
            self.error(f"{key} must be a finite number {valid}; got {value!r}")
            return False
        if value in valid:
            return True
        self.error(f"{key} must be {valid}; got {_show(value)}")
        return False

    def need_choice(self, key: str, value: Any, choices: Sequence[str]) -> bool:
        if value is _UNSET or value is None or value in choices:
            return True
        close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        self.error(f"{key} must be one of {_join(choices)}; got {value!r}{hint}")
        return False

    def need_known_keys(self, section: str, present: Sequence[str], valid: Sequence[str]) -> list[str]:
        """Report keys of ``section`` not in ``valid``; returns them."""
        unknown = [k for k in present if k not in valid]
        for k in unknown:
            close = difflib.get_close_matches(k, list(valid), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            shown = ", ".join(sorted(v for v in valid if not v.startswith("_")))
            self.error(f"{section} has no option {k!r}; valid options: {shown}{hint}")
        return unknown

    def check_section(
        self,
        section: str,
        values: Mapping[str, Any],
        hints: Mapping[str, Any],
        ranges: Mapping[str, Range],
        choices: Mapping[str, Sequence[str]] | None = None,
    ) -> dict[str, bool]:
        """Type, then range or choice, for every key of ``values`` that ``hints`` knows; returns key -> ok.
        ``section`` is the dotted prefix of the keys ("" for the top level)."""
        ok = {}
        for key, value in values.items():
            if key not in hints:
                continue
            full = f"{section}.{key}" if section else key
            good = self.need_type(full, value, hints[key])
            if good and key in ranges and _is_number(value):
                good = self.need_range(full, value, ranges[key])
            if good and choices and key in choices and isinstance(value, str):
                good = self.need_choice(full, value, choices[key])
            ok[key] = good
        return ok


_CASE_HINT = "e.g. problem.case=pglib_opf_case300_ieee (hardlinear.problems.available_cases() lists them)"


def _missing_message(key: str) -> str:
    if key == "problem.case":
        return f"problem.case is required (it is ???); {_CASE_HINT}"
    return f"{key} is required but not set (it is ???); set it with {key}=..."
