"""Moved to :mod:`hardlinear.rules.sparse_elimination`; this old path warns (``DeprecationWarning``) and will be removed."""

from hardlinear._moved import alias

alias(__name__)
