"""Every config composes, every problem builds and every method instantiates (lightning-hydra habit)."""

import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from hardlinear.harness.runner import problem_from_config
from hardlinear.methods.base import Method

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
# dcopf needs a case and linear a file (tests/test_linear_problem.py runs it)
PROBLEMS = sorted(p.stem for p in (CONF / "problem").glob("*.yaml") if p.stem not in ("dcopf", "linear"))
METHODS = sorted(p.stem for p in (CONF / "method").glob("*.yaml"))
EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))


def compose_cfg(*overrides):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


@pytest.mark.parametrize("problem", PROBLEMS)
def test_every_problem_config_builds(problem):
    cfg = compose_cfg(f"problem={problem}")
    p = problem_from_config(cfg)
    # presets of the generic builder (name: dcopf, case: ...) take the PGLib case's name; DC3's datasets
    # append their sizes (dc3_qp_eq50_ineq50)
    expected = cfg.problem.case if cfg.problem.name == "dcopf" else cfg.problem.name
    if cfg.problem.name == "ed":  # economic dispatch: one name per case, so that cases stay apart in the tables
        expected = "ed_" + cfg.problem.case.removeprefix("pglib_opf_")
    assert p.name == expected or (p.name.startswith(f"{expected}_eq") and cfg.problem.name.startswith("dc3_"))
    assert cfg.trainer.epochs == cfg.problem.train.epochs


def test_generic_dcopf_config_takes_any_case():
    cfg = compose_cfg("problem=dcopf", "problem.case=pglib_opf_case5_pjm", "problem.uncertainty=0.05")
    assert problem_from_config(cfg).k == 5


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("problem", ["dcopf_14", "portfolio"])
def test_every_method_config_instantiates(method, problem):
    cfg = compose_cfg(f"problem={problem}", f"method={method}", "trainer=fast")
    m = instantiate(cfg.method, _convert_="all")
    assert isinstance(m, Method)
    assert m.name == cfg.method.name


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_composes(experiment):
    cfg = compose_cfg(f"+experiment={experiment}")
    assert cfg.experiment


def test_cli_help_and_bad_choice_lists_valid_options():
    ok = subprocess.run([sys.executable, "run.py", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "problem:" in ok.stdout.replace("problem: ", "problem:")
    bad = subprocess.run([sys.executable, "run.py", "problem=dcopf_13", "--cfg", "job"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0
    # issue 43: one line naming the choice and listing the options, not Hydra's 28-line message
    assert bad.stderr.startswith("error: problem='dcopf_13' is not an option of conf/problem/") and "dcopf_118" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
