"""The constraint model (DESIGN.md section 2): the family ``C(x)`` (:mod:`.family`), the input set ``X``
(:mod:`.polytope`), the moment matrices of the SDP rule (:mod:`.moments`), and the row algebra they share with
the layers (:mod:`.signed_rows`, :mod:`.arrays`). The floor of the math: it imports no problem, rule or layer.
"""


def __getattr__(name: str) -> object:
    """The names of the old ``hardlinear.constraints`` module (now :mod:`.family`), with a ``DeprecationWarning``."""
    from hardlinear._moved import moved_name

    return moved_name(__name__, name)
