"""The checks of the method section: ``_target_`` must import as a :class:`~hardlinear.methods.base.Method`,
whose constructor gives the valid options and their types; the string options' choices come from the
constants of the code that consumes them; a method that needs a problem form must get it, and a
``rule_device`` other than cpu must be usable."""

from __future__ import annotations

import difflib
import importlib
import inspect
import sys
from collections.abc import Sequence
from typing import Any

from hardlinear.harness.schemas.checker import _UNSET, _Checker
from hardlinear.harness.schemas.hints import _signature_hints
from hardlinear.harness.schemas.tables import DTYPE_NAMES, HYDRA_KEYS, METHOD_RANGES


def _check_method(check: _Checker, method: Any, problem: Any) -> None:
    if not isinstance(method, dict):
        return
    cls = _method_class(check, method.get("_target_", _UNSET))
    if cls is None:
        return
    params = inspect.signature(cls.__init__).parameters
    takes_options = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    hints = _signature_hints(cls.__init__, skip=("self",))
    valid = list(hints) + list(HYDRA_KEYS)
    present = list(method)
    if takes_options:
        _check_solver_options(check, cls, method, [k for k in present if k not in valid], hints)
    else:
        check.need_known_keys("method", present, valid)
    before = len(check.errors)
    check.check_section("method", method, hints, METHOD_RANGES, _method_choices(cls))
    _check_required_form(check, cls, method, problem)
    _check_rule_device(check, method)
    if len(check.errors) == before:
        _check_constructor(check, cls, method)


def _check_solver_options(check: _Checker, cls: type, method: dict, extra: list[str], hints: dict) -> None:
    """Keys a method passes on to its solver: a near-miss of a named option is a typo; the rest must be on the
    solver's allow-list (``cls.extra_options``: tuning only, never an option that writes or reads a file)."""
    from hardlinear.solvers.base import solver_option_problems

    typos = []
    for key in extra:
        close = difflib.get_close_matches(key, list(hints), n=1, cutoff=0.8)
        if close:
            typos.append(key)
            check.error(
                f"method has no option {key!r} (did you mean {close[0]!r}?); valid options: "
                f"{', '.join(sorted(hints))}, plus options of the solver"
            )
    allowed = cls.extra_options(method) if hasattr(cls, "extra_options") else {}
    rest = {k: method[k] for k in extra if k not in typos}
    for line in solver_option_problems(str(method.get("solver", method.get("solve_method", cls.__name__))), rest, allowed):
        check.error(f"method: {line}")


def _check_constructor(check: _Checker, cls: type, method: dict) -> None:
    """Build the method from its options (a constructor checks its arguments in microseconds; ``setup`` does the
    work), so what only the class knows (``refine_pick`` needs ``refine``, ...) fails before the run starts,
    with the constructor's own message."""
    options = {k: v for k, v in method.items() if k not in HYDRA_KEYS}
    try:
        cls(**options)
    except (ValueError, TypeError) as err:
        check.error(f"method {method.get('name', cls.__name__)}: {str(err).splitlines()[0] if str(err) else type(err).__name__}")


def _check_rule_device(check: _Checker, method: dict) -> None:
    """``method.rule_device`` other than cpu: the reduced rule solver and a torch that sees the device."""
    device = method.get("rule_device", "cpu")
    if not isinstance(device, str) or device == "cpu":
        return
    from hardlinear.rules.decision_rule import check_rule_device

    try:
        check_rule_device(device, str(method.get("rule_solver", "auto")))
    except ValueError as err:
        check.error(f"method.rule_device={device!r}: {err}")


def _method_class(check: _Checker, target: Any) -> type | None:
    from hardlinear.methods.base import Method

    if target is _UNSET:
        check.error("method._target_ is missing; choose a method with method=<name>")
        return None
    if not check.need_type("method._target_", target, str):
        return None
    module_name, _, attr = target.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as err:
        check.error(
            f"method._target_ {target!r} cannot be imported ({type(err).__name__}: {err}); "
            "it must name a Method class, e.g. hardlinear.methods.proposed.Proposed"
        )
        return None
    if not (isinstance(cls, type) and issubclass(cls, Method)):
        check.error(f"method._target_ {target!r} is not a subclass of hardlinear.methods.base.Method")
        return None
    return cls


def _method_choices(cls: type) -> dict[str, Sequence[str]]:
    """Valid values of the string options, from the constants of the code that consumes them."""
    from hardlinear.methods.penalty import NORMS
    from hardlinear.rules.robust_lp import LP_SOLVERS
    from hardlinear.rules.robust_sdp import SDP_SOLVERS
    from hardlinear.solvers import BACKENDS

    def declared(constant: str, default: Sequence[str] | None = None) -> Sequence[str] | None:
        """``constant`` of the first module along the class's MRO that defines it (a subclass in another
        module, EAPM of APM, inherits its parent's choices)."""
        for klass in cls.__mro__:
            value = getattr(sys.modules.get(klass.__module__), constant, None)
            if value is not None:
                return tuple(value)
        return default

    choices: dict[str, Sequence[str]] = {
        "layer_dtype": DTYPE_NAMES,
        "train_dtype": DTYPE_NAMES,
        "solver": declared("SOLVERS", tuple(BACKENDS)),  # post-projection: QP solvers only
        "rule_solver": ("auto", *dict.fromkeys((*LP_SOLVERS, "sparse", "reduced", "rank_one", *SDP_SOLVERS))),  # the rule's LP or SDP; sparse: robust_lp_sparse, reduced: rules/reduced, rank_one: rules/rank_one
        "on_failure": declared("ON_FAILURE", ("raise", "nan")),
        "norm": NORMS,
    }
    for option, constant in (("targets", "TARGETS"), ("fit", "FITS"), ("thermal_slack", "THERMAL_SLACKS")):  # options only some methods have
        if (values := declared(constant)) is not None:
            choices[option] = values
    try:
        from hardlinear.layers.feasibility import DOMAIN_POLICIES, GRADIENTS

        choices.update(
            gradient=tuple(GRADIENTS), out_of_domain=declared("OUT_OF_DOMAIN", tuple(DOMAIN_POLICIES))
        )
    except ImportError:  # the layer is optional for methods that do not use it
        pass
    return choices


def _check_required_form(check: _Checker, cls: type, method: dict, problem: Any) -> None:
    required = getattr(cls, "required_form", None)  # a class attribute (APM's slacks: "standard")
    form = problem.get("form") if isinstance(problem, dict) else None
    if required and form not in (None, _UNSET, required):
        check.error(
            f"method {method.get('name', cls.__name__)} needs problem.form={required}; got problem.form={form!r}"
        )
