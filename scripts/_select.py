"""Moved to :mod:`hardlinear.commands.select` (the console command shares it); kept for the scripts that import it."""

from hardlinear.commands.select import add_arguments, load

__all__ = ["add_arguments", "load"]
