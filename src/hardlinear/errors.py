"""Exceptions shared across the wings, kept below them all so that no wing reaches up to raise one."""


class NotApplicable(Exception):
    """A method or layer does not apply to a problem; the message says why (e.g. an input-dependent
    left-hand side for a layer that needs constant matrices)."""
