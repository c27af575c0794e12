"""The harness: run.py's side. Config schemas and validation, one run, sweeps, loggers, the results store,
checkpoints and re-evaluation. The only wing (with :mod:`hardlinear.reporting`) that imports Hydra, OmegaConf
or pandas; the library below it takes typed arguments."""

from hardlinear.extras import check_installed

# A core install (`pip install hardlinear`) lacks these: say which extra brings them before a submodule's
# bare ModuleNotFoundError does. find_spec looks the packages up without importing them.
check_installed(("hydra", "omegaconf", "pandas"), extra="harness", purpose="the harness (run.py, records, reload)")


def __getattr__(name: str) -> object:
    """The functions of the old ``hardlinear.harness`` module (now :mod:`hardlinear.harness.runner`), with a
    ``DeprecationWarning``."""
    from hardlinear._moved import moved_name

    return moved_name(__name__, name)
