"""``python evaluate.py RUN_DIR [--test-seed S] [--inputs FILE]``: the same as ``hardlinear evaluate``
(:mod:`hardlinear.commands.evaluate` holds the code and says more: ``--help``)."""

import sys

from hardlinear.commands.evaluate import main

if __name__ == "__main__":
    sys.exit(main(prog="evaluate.py"))
