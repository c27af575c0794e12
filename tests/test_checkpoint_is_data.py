"""Issue 43, item 1: a checkpoint is data. Every option stored in a checkpoint's config passes the checks
``run.py`` applies to the command line before anything is built, so no stored option can write, create or read
a file, choose the folder this process writes into, or ask for unbounded threads, sizes or iterations.

Each hostile payload is planted in a ``checkpoint.pt`` and loaded; the load must fail with a line naming the key,
and the victim file must be untouched (no folder created). The same options on the command line fail the same
way (``validate_config``)."""

from pathlib import Path

import pytest
import torch

from hardlinear.harness.checkpoint import FORMAT_VERSION, CheckpointError, load_run
from hardlinear.harness.schemas import ConfigError, validate_stored_config
from hardlinear.problems.dcopf import load_network

BASE = {"problem": {"name": "dcopf_14"}, "seed": 0, "dtype": "float32", "threads": 1}
OPTIMIZER = {"_target_": "hardlinear.methods.optimizer.Optimizer", "name": "optimizer", "solver": "highs"}
POST_PROJECTION = {"_target_": "hardlinear.methods.post_projection.PostProjection", "name": "post_projection"}
PROJECTION_LAYER = {"_target_": "hardlinear.methods.projection_layer.ProjectionLayer", "name": "projection_layer"}
PROPOSED = {"_target_": "hardlinear.methods.proposed.Proposed", "name": "proposed"}
LDR = {"_target_": "hardlinear.methods.ldr.LDR", "name": "ldr"}


def _plant(run_dir: Path, method: dict, **top) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    config = {**BASE, **top, "method": method}
    torch.save({"format": FORMAT_VERSION, "method": method.get("name", "x"), "config": config, "state_dict": {}, "probe": None},
               run_dir / "checkpoint.pt")
    return run_dir


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    return victim


def _refused(run_dir: Path, *expected: str) -> str:
    with pytest.raises(CheckpointError) as info:
        load_run(run_dir, cache_dir=run_dir.parent / "caller-cache", allow_missing_probe=True)
    message = str(info.value)
    assert "refused to load" in message
    for text in expected:
        assert text in message, message
    return message


# --- the four holes of the issue: solver options that write, create or read files --------------------------
def test_highs_solution_file_overwrites_nothing(tmp_path):
    victim = _victim(tmp_path)
    method = {**OPTIMIZER, "write_solution_to_file": True, "solution_file": str(victim)}
    _refused(_plant(tmp_path / "run", method), "solver highs has no option 'write_solution_to_file'",
             "'solution_file'", "never allowed")
    assert victim.read_text() == "keep me"


def test_highs_log_file_creates_nothing(tmp_path):
    log = tmp_path / "new" / "highs.log"
    method = {**OPTIMIZER, "output_flag": True, "log_file": str(log)}
    _refused(_plant(tmp_path / "run", method), "'log_file'", "'output_flag'")
    assert not log.parent.exists()


@pytest.mark.parametrize("base", [OPTIMIZER, POST_PROJECTION], ids=["optimizer", "post_projection"])
def test_gurobi_log_file_creates_nothing(tmp_path, base):
    log = tmp_path / "gurobi.log"
    _refused(_plant(tmp_path / "run", {**base, "solver": "gurobi", "LogFile": str(log)}), "solver gurobi has no option 'LogFile'")
    assert not log.exists()


def test_diffcp_write_data_file_is_refused(tmp_path):
    dump = tmp_path / "scs-data"
    method = {**PROJECTION_LAYER, "solve_method": "SCS", "write_data_filename": str(dump)}
    _refused(_plant(tmp_path / "run", method), "solver SCS has no option 'write_data_filename'")
    assert not dump.exists()


def test_an_unknown_option_of_a_method_without_passthrough_is_refused(tmp_path):
    _refused(_plant(tmp_path / "run", {**PROPOSED, "log_file": "x"}), "method has no option 'log_file'")


def test_tuning_options_of_the_allow_list_still_load_as_data(tmp_path):
    """The allow-list is not a wall: a stored ``time_limit`` passes the checks (a bad value of it does not)."""
    validate_stored_config({**BASE, "method": {**OPTIMIZER, "time_limit": 60.0}})
    with pytest.raises(ConfigError, match=r"solver option time_limit of highs must be in \[0, 1e\+09\]; got -1"):
        validate_stored_config({**BASE, "method": {**OPTIMIZER, "time_limit": -1.0}})


# --- stored options not validated on the load path before: each refused before anything is built ----------
def test_problem_case_is_looked_up_never_joined_as_a_path(tmp_path):
    evil = tmp_path / "evil.m"
    evil.write_text("function mpc = evil\nmpc.baseMVA = 100;\n")
    case = "../" * 12 + str(evil.with_suffix(""))[1:]
    _refused(_plant(tmp_path / "run", LDR, problem={"name": "dcopf", "case": case, "uncertainty": 0.1}),
             f"problem.case {case!r} is not a PGLib-OPF case")
    with pytest.raises(ValueError, match="unknown PGLib case"):  # the library refuses it too, without reading it
        load_network(case)


@pytest.mark.parametrize(("top", "expected"), [
    ({"threads": 100000}, "threads must be in [1, 1024]; got 100000"),
    ({"threads": -3}, "threads must be in [1, 1024]; got -3"),
    ({"network": {"hidden": 10**7, "layers": 2}}, "network.hidden must be in [1, 65536]; got 10000000"),
    ({"seed": 2**64}, "seed must be < 2**63"),
], ids=["threads-100000", "threads-negative", "hidden-1e7", "seed-2**64"])
def test_unbounded_sizes_are_refused(tmp_path, top, expected):
    _refused(_plant(tmp_path / "run", PROPOSED, **top), expected)


@pytest.mark.parametrize(("option", "expected"), [
    ({"refine": "dr", "refine_eval_steps": 10**9}, "method.refine_eval_steps must be in [1, 100000]; got 1000000000"),
    ({"refine": "dr", "refine_omega": 2.5}, "method.refine_omega must be in (0, 2); got 2.5"),
    ({"refine_pick": "objective"}, "method proposed: method.refine_pick=objective chooses between"),
], ids=["refine_eval_steps-1e9", "refine_omega", "constructor-only-check"])
def test_method_options_are_checked_as_the_command_line_checks_them(tmp_path, option, expected):
    _refused(_plant(tmp_path / "run", {**PROPOSED, **option}), expected)


def test_pinet_bwd_tol_nan_is_refused(tmp_path):
    pinet = {"_target_": "hardlinear.methods.pinet.Pinet", "name": "pinet", "bwd_tol": float("nan")}
    _refused(_plant(tmp_path / "run", pinet), "method.bwd_tol must be a finite number >= 0; got nan")
    from hardlinear.methods.pinet import Pinet

    with pytest.raises(ValueError, match="bwd_tol must be a finite number >= 0"):
        Pinet(bwd_tol=float("nan"))


def test_cache_dir_comes_from_the_caller_never_from_the_checkpoint(tmp_path, monkeypatch):
    """The stored ``cache_dir`` names a folder; the load writes its rule into the caller's folder (or, when the caller
    names none, nowhere), and the stored one is never created."""
    evil = tmp_path / "evil" / "dir"
    run = _plant(tmp_path / "run", LDR, cache_dir=str(evil))
    mine = tmp_path / "mine"
    with pytest.raises(CheckpointError, match="does not fit"):  # the planted state is empty: refused after set-up
        load_run(run, cache_dir=mine, allow_missing_probe=True)
    assert not (tmp_path / "evil").exists()
    assert list((mine / "decision_rules").glob("*.rule")), "the rule was not cached where the caller said"
    monkeypatch.chdir(tmp_path / "run")
    with pytest.raises(CheckpointError, match="does not fit"):
        load_run(run, allow_missing_probe=True)
    assert not (tmp_path / "evil").exists()
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["checkpoint.pt"]  # nothing cached in the cwd


def test_a_problem_file_is_named_by_the_caller_never_by_the_checkpoint(tmp_path):
    """``problem.path`` stored in a checkpoint is not opened: the caller names the file, whose content must then
    be the run's (the recorded sha256)."""
    secret = tmp_path / "secret.npz"
    secret.write_bytes(b"not yours")
    run = _plant(tmp_path / "run", PROPOSED, problem={"name": "linear", "path": str(secret)},
                 content={"problem.path": "0" * 64})
    with pytest.raises(CheckpointError, match=r"this run read problem.path=.*secret.npz.*files=\{'problem.path': <path>\}"):
        load_run(run, allow_missing_probe=True)
    mine = tmp_path / "mine.npz"
    mine.write_bytes(b"mine")
    with pytest.raises(CheckpointError, match=r"problem.path=.*mine.npz changed since the run"):
        load_run(run, files={"problem.path": mine}, allow_missing_probe=True)
    with pytest.raises(CheckpointError, match="the run read no file data.test_inputs; it read problem.path"):
        load_run(run, files={"problem.path": mine, "data.test_inputs": mine}, allow_missing_probe=True)


def test_a_stored_network_beyond_the_free_memory_is_refused_before_it_is_built(tmp_path):
    """Within the range (hidden <= 65,536) yet 65,536 x 65,536 x 255 float32 weights: ~4 TB."""
    run = _plant(tmp_path / "run", LDR, network={"hidden": 65536, "layers": 255})
    with pytest.raises(CheckpointError, match=r"refused to load: network.hidden=65536 with network.layers=255 needs about"):
        load_run(run, cache_dir=tmp_path / "cache", allow_missing_probe=True)
