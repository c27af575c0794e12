"""A researcher's own study, start to finish, through the commands a user types (issue 32).

A small QP of one's own as an ``.npz``, a sweep of four methods (``hardnet_aff`` does not apply to it) ->
the study's table holds every run, the not-applicable one with its reason -> the file is edited -> the rerun
runs (no "already recorded"), and table and figures keep the two contents apart -> ``load_run`` and
``evaluate.py`` reload the model under 1 and 2 BLAS threads -> training resumes from ``last.pt`` and ends
where an uninterrupted run ends. Everything lands under the given ``results_dir`` and nowhere else.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from hardlinear.harness import results

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
SMALL = ["trainer=fast", "data.val_size=16", "data.test_size=16", "eval.throughput_batch=128", "eval.warmup=0", "progress=false"]


def arrays(shift: float = 0.0) -> dict:
    """A bounded QP in R^6 with 2 inputs (as tests/test_linear_problem.py's): y in [-2, 2]^6, sum(y) = xi_0."""
    rng = np.random.default_rng(0)
    n, k = 6, 2
    H = np.vstack([np.eye(n), -np.eye(n), rng.normal(size=(2, n))])
    Hx = np.zeros((2 * n + 2, k))
    Hx[-2:, 1] = 0.5
    return {
        "c": rng.normal(size=n) + shift, "Q": np.diag(rng.uniform(0.5, 1.0, n)), "G": np.ones((1, n)),
        "g0": np.zeros(1), "Gx": np.array([[1.0, 0.0]]), "H": H, "h0": np.concatenate([2 * np.ones(2 * n), 3 * np.ones(2)]),
        "Hx": Hx, "lo": -np.ones(k), "hi": np.ones(k),
    }


def sh(args: list[str], env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})
    assert done.returncode == 0, f"{args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _new_under(folder: Path, since: float) -> list[Path]:
    if not folder.exists():
        return []
    return [p for p in folder.rglob("record.json") if p.stat().st_mtime >= since]


@pytest.mark.slow
def test_own_npz_study_start_to_finish(tmp_path):
    t0 = time.time()
    problem = tmp_path / "ed.npz"
    np.savez(problem, **arrays())
    res = tmp_path / "elsewhere"
    base = [PY, "run.py", "problem=linear", f"problem.path={problem}", *SMALL, f"results_dir={res}",
            f"cache_dir={tmp_path / 'cache'}", "study=ed"]

    # --- a sweep over four methods, one of which does not apply -----------------------------------------------------
    sweep = sh([*base[:2], "-m", *base[2:], "method=proposed,ldr,penalty,hardnet_aff"])
    assert "NOT APPLICABLE linear/hardnet_aff" in sweep.stderr
    first = results.load_records(res, study="ed", quiet=True)
    assert sorted(first["method"]) == ["hardnet_aff", "ldr", "penalty", "proposed"]
    assert all(Path(r).resolve().is_relative_to(res.resolve()) for r in first["record"])  # records under results_dir
    assert all(Path(r).parent.joinpath("checkpoint.pt").exists() for r in first[first["status"] == "ok"]["record"])
    assert not _new_under(ROOT / "results", t0), "a record landed outside results_dir"
    assert oct(Path(first["record"][0]).stat().st_mode & 0o777) == oct(0o666 & ~_umask())  # the umask's mode, not 0600

    # --- the study's table holds every run, the not-applicable one with its reason ------------------------------------
    out = tmp_path / "tables"
    sh([PY, "scripts/make_tables.py", "--results", str(res), "--study", "ed", "--out", str(out)])
    md = (out / "ed" / "study.md").read_text()
    for label in ("| Proposed |", "| LDR |", "| Penalty † |"):
        assert label in md, label
    assert "| HardNet-Aff | 1 |" in md and "not applicable: HardNet-Aff needs" in md
    assert "trainer.name=fast" in md and "trainer.epochs=4" in md  # the shared settings that differ from the defaults
    assert (out / "ed" / "study.tex").exists() and "not_applicable" in (out / "ed" / "study.csv").read_text()

    # --- the file is edited: the rerun runs, and table and figures keep the contents apart ----------------------------
    np.savez(problem, **arrays(shift=0.5))
    again = sh([*base[:2], "-m", *base[2:], "method=proposed,ldr"])
    assert "already recorded" not in again.stdout
    second = results.load_records(res, study="ed", quiet=True)
    assert len(second) == 6 and second["problem_sha256"].nunique() == 2
    sh([PY, "scripts/make_tables.py", "--results", str(res), "--study", "ed", "--out", str(out)])
    md = (out / "ed" / "study.md").read_text()
    digests = sorted(set(second["problem_sha256"]))
    assert all(f"sha256 {d}" in md for d in digests) and "2 different contents under one name" in md
    sh([PY, "scripts/make_figures.py", "--results", str(res), "--study", "ed", "--out", str(tmp_path / "fig"), "--formats", "png"])
    figures = sorted(p.name for p in (tmp_path / "fig" / "ed").glob("*_gap_violation.png"))
    assert len(figures) == 2 and all(any(d in f for f in figures) for d in digests)
    unchanged = sh([*base[:2], "-m", *base[2:], "method=ldr"])  # same content, same config: skipped, said once
    assert "already recorded" in unchanged.stdout

    # --- the model reloads under 1 and 2 BLAS threads ---------------------------------------------------------------
    now = second[(second["method"] == "proposed") & (second["problem_sha256"] == _sha12(problem))]
    run_dir = Path(now["record"].iloc[0]).parent
    probe = ("import sys, torch, hardlinear; from hardlinear.harness.checkpoint import read_checkpoint;"
             "m = hardlinear.load_run(sys.argv[1], files={'problem.path': sys.argv[2]}, cache_dir=sys.argv[3]); p = read_checkpoint(sys.argv[1])['probe'];"
             "print('diff', float((m.predict(p['xi']).y.double() - p['y']).abs().max()))")
    for threads in ("1", "2"):
        env = {"OPENBLAS_NUM_THREADS": threads, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "PYTHONPATH": str(ROOT / "src")}
        assert "diff" in sh([PY, "-c", probe, str(run_dir), str(problem), str(tmp_path / "cache")], env=env).stdout
        ev = sh([PY, "evaluate.py", str(run_dir), "--file", f"problem.path={problem}", "--cache-dir", str(tmp_path / "cache"), "--test-seed", "7", "--out", str(tmp_path / f"eval{threads}")], env=env)
        assert "evaluated linear/proposed" in ev.stdout
    old = first[first["method"] == "proposed"]
    refused = subprocess.run([PY, "-c", probe, str(Path(old["record"].iloc[0]).parent), str(problem), str(tmp_path / "cache")], cwd=ROOT, capture_output=True, text=True)
    assert refused.returncode != 0 and "changed since the run" in refused.stderr  # the file it was trained on is gone

    # --- training resumes from the last checkpoint, and ends where an uninterrupted run ends ------------------------------
    assert (run_dir / "last.pt").exists()
    single = [PY, "run.py", "problem=linear", f"problem.path={problem}", *SMALL, f"results_dir={res}",
              f"cache_dir={tmp_path / 'cache'}", "study=resume", "method=proposed", "trainer.epochs=6"]
    resumed = sh([*single, f"trainer.resume={run_dir}"])
    straight = sh(single)
    assert "resuming training at epoch 5 of 6" in resumed.stderr + resumed.stdout
    table = results.load_records(res, study="resume", quiet=True)
    assert len(table) == 2 and set(table["status"]) == {"ok"}
    states = [torch.load(Path(r).parent / "checkpoint.pt", weights_only=True)["state_dict"] for r in table["record"]]
    assert states[0].keys() == states[1].keys()
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0] if torch.is_tensor(states[0][k]))
    assert "epoch 6/6" in straight.stderr + straight.stdout  # a progress line per validation in a log (no terminal)
    assert not _new_under(ROOT / "results", t0), "a record landed outside results_dir"


def _sha12(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_run_directories_are_unique_within_one_second(tmp_path):
    """Two runs started in the same second get two directories (issue 29 item 2): the ${uid:} suffix."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from hardlinear.harness.rundirs import register_resolvers

    register_resolvers()
    dirs = set()
    for _ in range(2):
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            cfg = compose(config_name="config", overrides=[f"results_dir={tmp_path}"], return_hydra_config=True)
        OmegaConf.clear_cache(cfg)  # a fresh process draws a fresh suffix
        dirs.add(str(cfg.hydra.run.dir))
    assert len(dirs) == 2 and all(d.startswith(str(tmp_path) + "/runs/") for d in dirs)


def test_content_enters_the_identity(tmp_path):
    from hardlinear.harness.content import changed_files, with_content

    path = tmp_path / "p.npz"
    np.savez(path, **arrays())
    config = {"problem": {"name": "linear", "path": str(path)}, "data": {"solver": "clarabel"}, "seed": 0}
    before = with_content(config)
    assert set(before["content"]) == {"problem.path"} and changed_files(before) == []
    np.savez(path, **arrays(shift=1.0))
    after = with_content(config)
    assert results.identity(before) != results.identity(after)
    assert "changed since the run" in changed_files(before)[0]
    assert with_content({"problem": {"name": "dcopf_14"}}) == {"problem": {"name": "dcopf_14"}}  # no file: unchanged
    json.dumps(after)  # plain JSON: it is stored in the record
