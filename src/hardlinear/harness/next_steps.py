"""What a finished run prints last: where its results are and the commands a user types next.

Why: ``make run`` ended on a metrics line, and a newcomer had to find in the README how to reload the model, make a
table or run a sweep. The lines name this run's own directory, study and problem, so they can be pasted as they are:
a run of ``problem=linear problem.path=mine.npz`` gets a reload line that names the file (``load_run`` refuses a
run that read one until the caller names it) and a sweep line that keeps ``problem=linear problem.path=mine.npz``
(before, it dropped them and would have run the default problem); a run with its own ``results_dir`` gets table
commands that read it.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

DEFAULT_RESULTS = "results"
"""``conf/config.yaml``'s ``results_dir``: the folder ``make tables`` and ``hardlinear tables`` read by default."""
SWEEP_METHODS = "method=proposed,ldr,penalty seed=0,1 trainer=fast study=mine"


KEPT_KEYS = ("results_dir", "cache_dir")
"""Top-level keys a sweep line keeps besides the problem's: where the run wrote (the table line reads there) and
its caches."""


def kept_overrides(overrides: Sequence[str]) -> list[str]:
    """The command-line overrides that choose or set the problem (``problem=linear``, ``problem.path=mine.npz``,
    ``+problem.x=1``) and ``KEPT_KEYS``, in their order: what a sweep over methods must keep to run on the same
    problem and write beside this run."""
    kept = []
    for arg in overrides:
        key = arg.lstrip("+~").partition("=")[0]
        if key == "problem" or key.startswith("problem.") or key in KEPT_KEYS:
            kept.append(arg)
    return kept


def next_steps(run_dir: str | Path, study: str, installed: bool = False, *, overrides: Sequence[str] = (),
               files: Mapping[str, str] | None = None, results_dir: str | Path = DEFAULT_RESULTS,
               config_dirs: Sequence[str | Path] = ()) -> str:
    """The closing block of a single run (``run.py`` prints it after the ``done`` line); ``installed``: the run came
    from the console command (``hardlinear run``), so the block names its commands instead of the checkout's make.
    ``overrides``: the run's command-line overrides (its problem's and ``KEPT_KEYS`` are kept in the sweep line); ``files``: the
    problem files a reload must name (``checkpoint.files_to_name``: ``{"problem.path": "mine.npz"}``), named in the reload line;
    ``results_dir``: where the run wrote (named in the table line unless the default); ``config_dirs``: the
    ``--config-dir`` folders of the run (kept in the sweep line: a problem of one's own lives there)."""
    run_dir = Path(run_dir)
    same_problem = [f"--config-dir {shlex.quote(str(d))}" for d in config_dirs]
    same_problem += [shlex.quote(o) for o in kept_overrides(overrides)]
    results = str(results_dir)
    elsewhere = results.rstrip("/") != DEFAULT_RESULTS
    if installed:
        select = f"--study {study}" + (f" --results {shlex.quote(results)}" if elsewhere else "")
        table = f"hardlinear tables {select}    in a browser: hardlinear report {select}"
        report = f"hardlinear report --study mine{f' --results {shlex.quote(results)}' if elsewhere else ''}"
        sweep = " ".join(["hardlinear run -m", *same_problem, SWEEP_METHODS]) + f"   (then {report})"
    else:
        select = f"STUDY={study}" + (f" RESULTS={shlex.quote(results)}" if elsewhere else "")
        table = f"make tables {select}    in a browser: make report {select}"
        report = f"make report STUDY=mine{f' RESULTS={shlex.quote(results)}' if elsewhere else ''}"
        sweep = " ".join(["python run.py -m", *same_problem, SWEEP_METHODS]) + f"   (then {report})"
    named = f", files={dict(files)!r}" if files else ""
    return "\n".join([
        "[hardlinear] next:",
        f"  results    {run_dir / 'record.json'} (metrics.json, epochs.csv and checkpoint.pt beside it)",
        f"  the model  python -c \"import hardlinear; m = hardlinear.load_run('{run_dir}'{named}); print(m.predict(m.problem.sample(4)).y)\"",
        f"  a table    {table}",
        f"  a sweep    {sweep}",
    ])
