"""Typed validation of a composed run config, so a bad setting fails before any work starts
(:func:`validate_config`; its module docstring says what it catches).

- :mod:`.validate`: ``validate_config``, the entry point, section by section;
- :mod:`.checker`: the error accumulator ``_Checker`` and ``ConfigError``;
- :mod:`.hints`: type annotations read from code, matched against values and said in words;
- :mod:`.tables`: the ranges and choices written down (``Range``);
- :mod:`.sections`: the checks of the top level, device, data, logger, problem and trainer;
- :mod:`.method`: the checks of the method;
- :mod:`.machine`: paths, seeds and threads (``output_path_problem``, ``available_cores``).
"""

from hardlinear.harness.schemas.checker import ConfigError
from hardlinear.harness.schemas.machine import available_cores, output_path_problem
from hardlinear.harness.schemas.tables import Range
from hardlinear.harness.schemas.validate import validate_config, validate_stored_config

__all__ = ["ConfigError", "Range", "available_cores", "output_path_problem", "validate_config", "validate_stored_config"]
