"""What a finished run prints last: where its results are and the commands a user types next.

Why: ``make run`` ended on a metrics line, and a newcomer had to find in the README how to reload the model, make a
table or run a sweep. The lines name this run's own directory and study, so they can be pasted as they are.
"""

from __future__ import annotations

from pathlib import Path


def next_steps(run_dir: str | Path, study: str) -> str:
    """The closing block of a single run (``run.py`` prints it after the ``done`` line)."""
    run_dir = Path(run_dir)
    return "\n".join([
        "[hardlinear] next:",
        f"  results    {run_dir / 'record.json'} (metrics.json, epochs.csv and checkpoint.pt beside it)",
        f"  the model  python -c \"import hardlinear; m = hardlinear.load_run('{run_dir}'); print(m.predict(m.problem.sample(4)).y)\"",
        f"  a table    make tables STUDY={study}    in a browser: make report STUDY={study}",
        "  a sweep    python run.py -m method=proposed,ldr,penalty seed=0,1 trainer=fast study=mine   (then make report STUDY=mine)",
    ])
