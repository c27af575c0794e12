"""Entry point in a checkout: ``python run.py problem=dcopf_118 method=proposed`` (``-m`` for sweeps), on this
checkout's ``conf/``. The same command as ``hardlinear run`` (:mod:`hardlinear.commands.run` holds the code)."""

import sys
from pathlib import Path

from hardlinear.commands.run import main

if __name__ == "__main__":
    sys.exit(main(prog="run.py", config_dir=Path(__file__).resolve().parent / "conf"))
