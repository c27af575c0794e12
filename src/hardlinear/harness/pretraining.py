"""An explicit ``trainer.epochs`` wins over a pre-training schedule; methods that do not pre-train ignore it.

Why: every problem's schedule pre-trains 100 of 300 epochs, so ``problem=ed ... method=e2elr,ldf,proposed
trainer.epochs=30`` refused all three runs ("trainer.pretrain_epochs (100) cannot exceed trainer.epochs (30)"),
though E2ELR and LDF never pre-train. Now:

* a method that does not pre-train (:func:`method_pretrains`: its class has no ``pretrain_target``, or its
  ``pretrain`` is off) is not checked against ``pretrain_epochs`` and trains with 0 pre-training epochs; its config
  is left as composed, so its identity (and a rerun's skip) does not change;
* for one that does, an ``epochs`` set on the command line (``trainer.epochs`` or ``problem.train.epochs``) below
  the schedule's ``pretrain_epochs`` cuts pre-training to the schedule's share of the epochs given (the problem's
  ``train.pretrain_epochs / train.epochs``: 100 of 300 -> 10 of 30), or to all of them where no share is known, and
  the run says so in one line. Both set on the command line and contradictory: still refused (the user's own
  numbers disagree; nothing to guess).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

EPOCH_KEYS = ("trainer.epochs", "problem.train.epochs")
PRETRAIN_KEYS = ("trainer.pretrain_epochs", "problem.train.pretrain_epochs")


def method_pretrains(method: Mapping[str, Any] | None) -> bool:
    """Whether the method of a config section (``cfg.method``) pre-trains at all: its class overrides
    ``pretrain_target`` and its ``pretrain`` option (or class attribute) is on. True when the class cannot be
    imported (the config check reports that)."""
    from hardlinear.methods.base import Method

    target = str((method or {}).get("_target_", ""))
    module, _, name = target.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return True
    if not (isinstance(cls, type) and issubclass(cls, Method)):
        return True
    if cls.pretrain_target is Method.pretrain_target or not getattr(cls, "trainable", True):
        return False
    return bool((method or {}).get("pretrain", getattr(cls, "pretrain", True)))


def _named(overrides: Sequence[str], keys: Sequence[str]) -> bool:
    return any(arg.lstrip("+").partition("=")[0] in keys for arg in overrides)


def fit_pretraining(cfg, overrides: Sequence[str]) -> str:
    """Cut ``cfg.trainer.pretrain_epochs`` (in place) to fit an ``epochs`` given on the command line, for a method
    that pre-trains; returns the one line that says so, ``""`` when nothing changed."""
    from omegaconf import open_dict

    trainer = cfg.trainer
    epochs, pretrain = trainer.get("epochs"), trainer.get("pretrain_epochs")
    if not isinstance(epochs, int) or not isinstance(pretrain, int) or pretrain <= epochs:
        return ""
    if not method_pretrains(cfg.get("method")) or not _named(overrides, EPOCH_KEYS) or _named(overrides, PRETRAIN_KEYS):
        return ""
    schedule = cfg.get("problem", {}).get("train", {}) or {}
    total, share = schedule.get("epochs"), schedule.get("pretrain_epochs")
    if isinstance(total, int) and isinstance(share, int) and 0 <= share < total and not _named(overrides, ("problem.train.epochs",)):
        cut, how = round(epochs * share / total), f"the schedule's share ({share} of {total})"
    else:
        cut, how = epochs, "all of them"
    with open_dict(trainer):
        trainer.pretrain_epochs = cut
    return (f"trainer.epochs={epochs} is below the schedule's pretrain_epochs={pretrain}: pre-training takes {how}, "
            f"{cut} of the {epochs} epochs (set trainer.pretrain_epochs=N to choose)")
