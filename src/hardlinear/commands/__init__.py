"""The ``hardlinear`` console command, for an installed package (``pip install 'hardlinear[harness]'``):

    hardlinear run problem=dcopf_14 method=proposed trainer=fast     # one run (Hydra overrides; -m for sweeps)
    hardlinear run --config-dir my_conf problem=my_problem           # your own config folder on the search path
    hardlinear tables|figures|report --study smoke                   # a study's table, figures, browser page
    hardlinear evaluate RUN_DIR --test-seed 7                        # a saved model on new data

Each sub-command is a module of this package with a ``main(argv) -> int`` (``python run.py``, ``evaluate.py`` and
``scripts/make_*.py`` in a checkout call the same functions). The modules load on demand: ``run`` and ``evaluate``
size the native thread pools before numpy and torch load.
"""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

CONF = Path(__file__).resolve().parents[1] / "conf"
"""The configs shipped inside the package (``hardlinear/conf``: in a checkout a link to the repository's ``conf/``)."""

COMMANDS = {
    "run": "one run or a sweep (-m) from the shipped configs, with Hydra overrides; --config-dir adds your own",
    "tables": "a table per study (study.md, .tex, .csv) under results/tables/<study>/",
    "figures": "figures per study (gap against time, violations, training curves) under results/figures/<study>/",
    "report": "a study in the browser: results/reports/<study>/index.html, self-contained",
    "evaluate": "evaluate a saved run again, on a new test set or your own inputs",
}
"""Sub-command -> what it does (its module is ``hardlinear.commands.<name>``)."""


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {what}" for name, what in COMMANDS.items()]
    return ("usage: hardlinear {" + ",".join(COMMANDS) + "} [ARGS...]\n\n"
            "Neural networks with hard linear constraints: the benchmark harness.\n\ncommands:\n" + "\n".join(lines)
            + "\n\n'hardlinear COMMAND --help' says more about each.")


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch ``hardlinear COMMAND ARGS...`` to ``hardlinear.commands.COMMAND.main(ARGS)``; its exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    if argv[0] == "--version":
        from hardlinear import __version__

        print(f"hardlinear {__version__}")
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        close = difflib.get_close_matches(command, COMMANDS, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        print(f"error: unknown command {command!r}{hint}; choose one of: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    from hardlinear.runtime.extras import MissingExtra

    try:
        module = importlib.import_module(f"hardlinear.commands.{command}")
        return int(module.main(rest, prog=f"hardlinear {command}") or 0)
    except MissingExtra as err:  # a core install: the one line that installs what the command needs
        print(f"error: {err}", file=sys.stderr)
        return 1
