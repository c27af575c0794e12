"""An explicit trainer choice wins over a ``problem_method`` config's schedule.

``conf/config.yaml`` loads ``problem_method/<problem>_<method>.yaml`` after the trainer, so that a peer's own
settings (FSNet's 500 epochs, DC3's 1,000) replace the trainer's. Without this module ``trainer=fast`` on the
command line was silently undone: the record said ``fast`` and the run took hours. When the command line names a
trainer (``trainer=fast``), :func:`apply_trainer_choice` composes the same config without the ``problem_method``
file and copies the schedule keys from it: the named trainer's epochs, budget and sampling win (and any
``trainer.key=value`` on the command line over both); the peer's tuning (learning rate, batch size, optimizer)
stays. The harness prints one line saying what replaced what.
"""

from __future__ import annotations

# ruff: noqa: E402 - the imports after require_extra() need the harness extra
from collections.abc import Sequence
from pathlib import Path

from hardlinear.harness import require_extra

require_extra()  # before Hydra's imports: a core install gets the pip line, not ModuleNotFoundError

from omegaconf import DictConfig, OmegaConf, open_dict

SCHEDULE_KEYS = ("epochs", "pretrain_epochs", "batches_per_epoch", "sampling", "train_size", "supervised_size",
                 "val_every", "time_budget_s", "early_stop_patience", "time_cap_min")
"""Trainer keys that set how long training runs: these follow an explicit trainer choice."""


def named_trainer(overrides: Sequence[str]) -> str | None:
    """The trainer chosen on the command line (``trainer=fast``, also one job of ``-m trainer=fast,default``);
    None when the command line names none."""
    for arg in overrides:
        key, sep, value = arg.lstrip("+").partition("=")
        if sep and key in ("trainer", "/trainer") and value:
            return value
    return None


def apply_trainer_choice(cfg: DictConfig, overrides: Sequence[str], config_dir: str | Path, config_name: str = "config") -> str:
    """Make the command line's trainer choice win over the ``problem_method`` config's schedule, in place.

    ``overrides`` are the job's command-line overrides (Hydra's ``overrides.task``). Composes with Hydra's global
    state where there is one (inside ``@hydra.main``: the user's search path included), else from ``config_dir``
    (a launcher's worker process). Returns a one-line note of the keys that changed, ``""`` when none did (no
    trainer named, no ``problem_method`` file, or it sets no schedule key)."""
    trainer = named_trainer(overrides)
    if trainer is None:
        return ""
    try:
        base = _compose([*overrides, "~problem_method"], config_dir, config_name)
    except Exception as err:  # noqa: BLE001 - Hydra's errors have no common base; the run is refused in one line
        from hardlinear.harness.schemas import ConfigError

        raise ConfigError([f"trainer={trainer} was named on the command line, but the config could not be composed "
                           f"without problem_method/{cfg.problem.name}_{cfg.method.name} to take its schedule "
                           f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); name the schedule "
                           "instead: trainer.epochs=N trainer.pretrain_epochs=M"]) from err
    changed = []
    with open_dict(cfg.trainer):
        for key in SCHEDULE_KEYS:
            ours, theirs = _value(cfg.trainer, key), _value(base.trainer, key)
            if ours == theirs:
                continue
            changed.append(f"{key}={_show(theirs)} (not {_show(ours)})")
            if key in base.trainer:
                cfg.trainer[key] = base.trainer[key]
            else:  # the named trainer leaves it to TrainerConfig's default
                del cfg.trainer[key]
    if not changed:
        return ""
    return (f"trainer={trainer} named on the command line wins over problem_method/{cfg.problem.name}_{cfg.method.name}: "
            + ", ".join(changed))


_MISSING = object()


def _compose(overrides: list[str], config_dir: str | Path, config_name: str) -> DictConfig:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        return compose(config_name=config_name, overrides=overrides)
    with initialize_config_dir(config_dir=str(Path(config_dir).resolve()), version_base="1.3"):
        return compose(config_name=config_name, overrides=overrides)


def _value(node: DictConfig, key: str):
    return OmegaConf.select(node, key, default=_MISSING) if key in node else _MISSING


def _show(value) -> str:
    return "default" if value is _MISSING else ("null" if value is None else str(value))
