"""Issue 44 item 9: a single run's output is short and ends with what to do next; training prints about ten
validation lines however long it is (``epochs.csv`` keeps every one)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

from hardlinear.train.trainer import LOG_LINES, TrainerConfig, _worth_a_line

ROOT = Path(__file__).resolve().parents[1]


def _lines(cfg: TrainerConfig) -> list[int]:
    """The 1-based epochs that get a line, among the validation epochs."""
    val = [e for e in range(cfg.epochs) if (e + 1) % cfg.val_every == 0 or e == cfg.epochs - 1]
    return [e + 1 for e in val if _worth_a_line(e, cfg, False)]


def test_about_ten_lines_whatever_the_schedule():
    paper = _lines(TrainerConfig(epochs=300, pretrain_epochs=100, val_every=5))
    assert paper[-1] == 300 and 100 in paper and len(paper) <= LOG_LINES + 2  # the last epoch, the end of pre-training
    assert _lines(TrainerConfig(epochs=4, pretrain_epochs=2, val_every=1)) == [1, 2, 3, 4]  # short ones: every line
    assert len(_lines(TrainerConfig(epochs=1000, pretrain_epochs=0, val_every=1))) == LOG_LINES
    assert _worth_a_line(41, TrainerConfig(epochs=300, pretrain_epochs=0, val_every=5), budget_spent=True)  # a budget's end


def test_a_run_ends_with_the_next_steps(tmp_path):
    cmd = [sys.executable, "run.py", "trainer=fast", "trainer.epochs=40", "trainer.pretrain_epochs=10", "progress=false",
           "data.val_size=16", "data.test_size=16", "eval.throughput_batch=128", f"results_dir={tmp_path}",
           f"cache_dir={tmp_path / 'cache'}", "study=first"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = (done.stdout + done.stderr).splitlines()
    assert len(out) <= 30, "\n".join(out)
    assert sum(" epoch " in line for line in out) <= LOG_LINES + 2
    (run_dir,) = tmp_path.glob("runs/dcopf_14/proposed/*")
    assert len(pd.read_csv(run_dir / "epochs.csv")) == 40  # the log file keeps every epoch
    tail = done.stdout.splitlines()[-5:]
    assert tail[0] == "[hardlinear] next:"
    assert str(run_dir / "record.json") in tail[1] and f"hardlinear.load_run('{run_dir}')" in tail[2]
    assert "make tables STUDY=first" in tail[3] and "make report STUDY=first" in tail[3]
    assert tail[4].lstrip().startswith("a sweep    python run.py -m ")
