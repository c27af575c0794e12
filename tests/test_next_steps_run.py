"""Issue 60 item 3: the commands a run prints last work for every problem, tested by running them. A run of
``problem=linear`` on an npz of one's own (from another folder, with its own ``results_dir``) prints a reload line
that names the file (``load_run`` refuses a run that read a file the caller did not name) and a sweep line that keeps
``problem=linear problem.path=...`` (before, it dropped them and ran dcopf_14) and writes beside the run.

The printed lines are run as printed, from the folder the run was started in; only ``python`` becomes this
interpreter and ``run.py`` this checkout's (the lines assume the checkout's folder), and the sweep gets the small
data and evaluation sizes of the other tests (keys the line does not set) so that it takes seconds.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_own_study import SMALL, arrays

from hardlinear.harness.next_steps import next_steps

ROOT = Path(__file__).resolve().parents[1]
FAST = [o for o in SMALL if not o.startswith("trainer=")]


def _sh(line: str, cwd: Path) -> subprocess.CompletedProcess:
    argv = shlex.split(line)
    if argv[:2] == ["python", "run.py"]:
        argv[:2] = [sys.executable, str(ROOT / "run.py")]
    elif argv[0] == "python":
        argv[0] = sys.executable
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, f"{line}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def hints(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A run of ``problem=linear`` started in a folder of one's own, and its ``next:`` block, by line name."""
    here = tmp_path_factory.mktemp("mine")
    np.savez(here / "mine.npz", **arrays())
    line = shlex.join(["python", "run.py", "problem=linear", "problem.path=mine.npz", "method=proposed", "trainer=fast",
                       *FAST, "results_dir=res", "cache_dir=cache", "study=first"])
    out = _sh(line, here).stdout.splitlines()
    block = out[out.index("[hardlinear] next:") + 1:]
    return here, {m.group(1): m.group(2) for m in (re.match(r"  (\w+(?: \w+)?)\s{2,}(.*)", b) for b in block) if m}


def test_the_reload_line_names_the_file_and_works(hints):
    here, lines = hints
    assert "files={'problem.path': 'mine.npz'}" in lines["the model"]
    printed = _sh(lines["the model"].strip(), here).stdout
    assert printed.count("[") >= 4  # four rows of outputs


def test_the_table_line_reads_where_the_run_wrote(hints):
    _, lines = hints
    assert "make tables STUDY=first RESULTS=res" in lines["a table"] and "make report STUDY=first RESULTS=res" in lines["a table"]


@pytest.mark.slow  # six runs (three methods, two seeds), about 30 s
def test_the_sweep_line_keeps_the_problem_and_runs(hints):
    from hardlinear.harness import results

    here, lines = hints
    sweep, _, then = lines["a sweep"].partition("   (then ")
    assert "problem=linear problem.path=mine.npz" in sweep and "results_dir=res" in sweep
    assert then.startswith("make report STUDY=mine RESULTS=res")
    _sh(f"{sweep} {shlex.join(FAST)}", here)
    df = results.report_table([str(here / "res")], study="mine")
    assert sorted(set(df["problem"])) == ["linear"] and len(df) == 6, df[["problem", "method", "seed", "status"]]
    assert sorted(set(df["method"])) == ["ldr", "penalty", "proposed"]


def test_the_lines_of_a_default_run_and_of_the_console_command():
    plain = next_steps("results/runs/x", "default")
    assert "load_run('results/runs/x'); print" in plain  # no files: none named
    assert "python run.py -m method=proposed,ldr,penalty" in plain and "RESULTS=" not in plain
    mine = next_steps("r/x", "s", installed=True, overrides=["problem=linear", "problem.path=my file.npz", "method=ldr",
                                                               "seed=3", "trainer.lr=0.1"],
                      files={"problem.path": "my file.npz"}, results_dir="r", config_dirs=["my conf"])
    sweep = mine.splitlines()[-1]
    assert "hardlinear run -m --config-dir 'my conf' problem=linear 'problem.path=my file.npz' method=proposed,ldr" in sweep
    assert "seed=3" not in sweep and "trainer.lr" not in sweep
    assert "hardlinear tables --study s --results r" in mine and "hardlinear report --study mine --results r" in sweep
