"""Judging a method: the paper's metrics in float64 (:mod:`.metrics`), the test-set evaluation and its timing
protocol (:mod:`.protocol`), and the audit of the layer's guarantee on hostile inputs (:mod:`.audit`).
Above the methods (it calls them), below the harness (it never sees Hydra or a results folder).
"""


def __getattr__(name: str) -> object:
    """The names of the old ``hardlinear.evaluation`` module (now :mod:`.protocol`), with a ``DeprecationWarning``."""
    from hardlinear._moved import moved_name

    return moved_name(__name__, name)
