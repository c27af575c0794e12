"""``python scripts/make_figures.py [--study S] [--where K=V] [--results ROOTS] [--out DIR]``: the same as ``hardlinear figures``
(:mod:`hardlinear.commands.figures` holds the code and says more: ``--help``)."""

import sys

from hardlinear.commands.figures import main

if __name__ == "__main__":
    sys.exit(main(prog="make_figures.py"))
