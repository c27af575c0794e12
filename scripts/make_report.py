"""``python scripts/make_report.py [--study S] [--where K=V] [--results ROOTS] [--out DIR]``: the same as ``hardlinear report``
(:mod:`hardlinear.commands.report` holds the code and says more: ``--help``)."""

import sys

from hardlinear.commands.report import main

if __name__ == "__main__":
    sys.exit(main(prog="make_report.py"))
