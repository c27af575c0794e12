"""Typed validation of a composed run config, so a bad setting fails before any work starts.

Hydra already rejects an unknown group choice and an override of a missing key without ``+``; this module
catches what gets through (``+problem.foo=1``, ``trainer.epochs=abc``, ``problem.uncertainty=-0.1``,
``method.penalty=-5``, ...). The valid keys and their types come from the code they configure: the problem's
and the method's constructor signatures and annotations, the fields of ``TrainerConfig`` and ``EvalConfig``,
the ``MLP`` signature. So a new option needs no edit here; only ranges and choices are written down (:mod:`.tables`).
Nothing is built and no solver is called: validation takes milliseconds.

Every error is collected before raising, so one run reports all of them:
``ConfigError: problem.uncertainty must be in (0, 1); got -0.1``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from hardlinear.harness.schemas.checker import ConfigError, _Checker
from hardlinear.harness.schemas.machine import _check_paths_and_threads, _check_seeds_and_names
from hardlinear.harness.schemas.method import _check_method
from hardlinear.harness.schemas.sections import _check_problem, _check_top, _check_trainer

if TYPE_CHECKING:
    from omegaconf import DictConfig


def validate_config(cfg: DictConfig | Mapping) -> None:
    """Check a composed run config (``run.py``'s ``cfg``) without building anything.

    Raises :class:`ConfigError` naming each bad key, its value and what is valid; returns None when the
    config can run. Call it first thing in ``harness.run``.
    """
    from omegaconf import DictConfig, OmegaConf  # a composed config: the harness extra is there (run.py)

    if not isinstance(cfg, DictConfig):
        cfg = OmegaConf.create(dict(cfg))
    check = _Checker()
    data = check.resolve(cfg, "")
    _check_top(check, data)
    _check_problem(check, data.get("problem"))
    _check_method(check, data.get("method"), data.get("problem"))
    _check_trainer(check, data.get("trainer"), _pretrains(data.get("method")))
    _check_paths_and_threads(check, data)
    if check.errors:
        raise ConfigError(check.errors)


IGNORED_ON_LOAD = ("device", "cache_dir", "results_dir", "logger", "hydra")
"""Keys of a stored config that a reload never uses (the caller names the device and the cache folder; nothing
is logged or recorded), so they are dropped before the checks, never acted on."""


def validate_stored_config(config: Mapping) -> None:
    """Check the config stored in a checkpoint with the checks ``run.py`` applies to the command line, before
    anything is built from it; :class:`ConfigError` naming each bad key otherwise.

    Why: a checkpoint travels, and the loader builds the problem and the method from its config; a stored option
    is as hostile as a typed one (``problem.case`` with ``../``, ``threads=100000``, ``network.hidden=10**7``,
    ``method.refine_eval_steps=10**9``, solver options that write files). Differences from
    :func:`validate_config`, each for a reason: a key the stored config lacks is not an error (older runs; the
    loader's default applies); :data:`IGNORED_ON_LOAD` is dropped, not checked; nothing is interpolated (the
    values are plain data, taken as they are)."""
    check = _Checker()
    data = {str(k): v for k, v in dict(config).items() if k not in IGNORED_ON_LOAD}
    _check_top(check, data, stored=True)
    _check_problem(check, data.get("problem"))
    _check_method(check, data.get("method"), data.get("problem"))
    _check_trainer(check, data.get("trainer"), _pretrains(data.get("method")))
    _check_seeds_and_names(check, data)
    if check.errors:
        raise ConfigError(check.errors)


def _pretrains(method) -> bool:
    from hardlinear.harness.pretraining import method_pretrains

    return method_pretrains(method) if isinstance(method, Mapping) else True
