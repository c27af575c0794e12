"""What a finished run prints last: where its results are and the commands a user types next.

Why: ``make run`` ended on a metrics line, and a newcomer had to find in the README how to reload the model, make a
table or run a sweep. The lines name this run's own directory and study, so they can be pasted as they are.
"""

from __future__ import annotations

from pathlib import Path


def next_steps(run_dir: str | Path, study: str, installed: bool = False) -> str:
    """The closing block of a single run (``run.py`` prints it after the ``done`` line); ``installed``: the run came
    from the console command (``hardlinear run``), so the block names its commands instead of the checkout's make."""
    run_dir = Path(run_dir)
    if installed:
        table = f"hardlinear tables --study {study}    in a browser: hardlinear report --study {study}"
        sweep = "hardlinear run -m method=proposed,ldr,penalty seed=0,1 trainer=fast study=mine   (then hardlinear report --study mine)"
    else:
        table = f"make tables STUDY={study}    in a browser: make report STUDY={study}"
        sweep = "python run.py -m method=proposed,ldr,penalty seed=0,1 trainer=fast study=mine   (then make report STUDY=mine)"
    return "\n".join([
        "[hardlinear] next:",
        f"  results    {run_dir / 'record.json'} (metrics.json, epochs.csv and checkpoint.pt beside it)",
        f"  the model  python -c \"import hardlinear; m = hardlinear.load_run('{run_dir}'); print(m.predict(m.problem.sample(4)).y)\"",
        f"  a table    {table}",
        f"  a sweep    {sweep}",
    ])
