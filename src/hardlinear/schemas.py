"""Moved to :mod:`hardlinear.harness.schemas`; this old path warns (``DeprecationWarning``) and will be removed."""

from hardlinear._moved import alias

alias(__name__)
