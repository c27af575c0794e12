"""``python scripts/make_tables.py [--study S] [--where K=V] [--results ROOTS] [--out DIR]``: the same as ``hardlinear tables``
(:mod:`hardlinear.commands.tables` holds the code and says more: ``--help``)."""

import sys

from hardlinear.commands.tables import main

if __name__ == "__main__":
    sys.exit(main(prog="make_tables.py"))
