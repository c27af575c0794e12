"""Moved to :mod:`hardlinear.rules.decision_rule`; this old path warns (``DeprecationWarning``) and will be removed."""

from hardlinear._moved import alias

alias(__name__)
