"""The harness: run.py's side. Config schemas and validation, one run, sweeps, loggers, the results store,
checkpoints and re-evaluation. The only wing (with :mod:`hardlinear.reporting`) that imports Hydra, OmegaConf
or pandas; the library below it takes typed arguments.

Two parts by what they need installed. Reusing a saved model (:mod:`.checkpoint`: ``load_run``, ``export``;
:mod:`.reevaluate`; :mod:`.trusted` and the stored-config checks of :mod:`.schemas`) runs on the core install
(``pip install hardlinear``): a checkpoint carries what they need, and they import no Hydra, OmegaConf or pandas.
Training and sweeps (:mod:`.runner`, :mod:`.sweep`, :mod:`.outputs`, :mod:`.trainer_choice`) need the ``harness``
extra and call :func:`require_extra` before their first Hydra import, so a core install gets the ``pip install``
line instead of a bare ``ModuleNotFoundError``.
"""

from hardlinear.runtime.extras import check_installed

TRAINING_PACKAGES = ("hydra", "omegaconf", "pandas")
"""What training and sweeps import (the ``harness`` extra brings them); reloading a model needs none of them."""


def require_extra(purpose: str = "training and sweeps (run.py, hardlinear run)") -> None:
    """:class:`~hardlinear.runtime.extras.MissingExtra` naming ``pip install 'hardlinear[harness]'`` when a package of
    :data:`TRAINING_PACKAGES` is absent (looked up without importing it)."""
    check_installed(TRAINING_PACKAGES, extra="harness", purpose=purpose)


def __getattr__(name: str) -> object:
    """The functions of the old ``hardlinear.harness`` module (now :mod:`hardlinear.harness.runner`), with a
    ``DeprecationWarning``."""
    from hardlinear._moved import moved_name

    return moved_name(__name__, name)
