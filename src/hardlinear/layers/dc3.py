"""Moved to :mod:`hardlinear.layers.peers.dc3`; this old path warns (``DeprecationWarning``) and will be removed."""

from hardlinear._moved import alias

alias(__name__)
