"""Moved to :mod:`hardlinear.rules.robust_lp_sparse`; this old path warns (``DeprecationWarning``) and will be removed."""

from hardlinear._moved import alias

alias(__name__)
