"""Issue 60, item 6: ``hardlinear.export`` writes a ``torch.export`` program (``.pt2``) by default, TorchScript on
request; every method whose ``predict`` is torch arithmetic exports, ``proposed_refined`` included (its
Douglas-Rachford loop once failed under tracing: "Tracer cannot set value trace for type None"); the program's
outputs equal the live model's in float64 to 1e-12 at any batch size; reload and export warn nothing.

Each method is a tiny dcopf_14 run (two epochs, a 16-wide network). ``proposed`` and ``proposed_refined`` (with 6
Douglas-Rachford steps at inference, so that the unrolled program stays small) are in the default suite; the other
methods are marked slow (a training run and an export each)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

import hardlinear
from hardlinear.harness import runner as harness
from hardlinear.harness.checkpoint import CheckpointError, check_inputs, checkpoint_path

ROOT = Path(__file__).resolve().parents[1]
FAST = ("proposed", "proposed_refined")
SLOW = ("dc3", "ldr", "penalty", "alm", "apm", "eapm", "ldf", "gauge", "pinet", "e2elr", "hardnet_aff",
        "proposed_nopretrain")
EXTRA = {"proposed_refined": ["method.refine_steps=2", "method.refine_eval_steps=6"]}


_RUNS: dict[tuple[Path, str], Path] = {}


def _train(work: Path, method: str) -> Path:
    """The tiny run of ``method`` (trained once a session)."""
    if (work, method) not in _RUNS:
        _RUNS[work, method] = _train_once(work, method)
    return _RUNS[work, method]


def _train_once(work: Path, method: str) -> Path:
    overrides = [
        "problem=dcopf_14", f"method={method}", "trainer=fast", "trainer.epochs=2", "trainer.pretrain_epochs=1",
        "network.hidden=16", "progress=false", "data.val_size=8", "data.test_size=8", "eval.throughput_batch=16",
        "eval.warmup=0", "eval.time_instances=2", f"cache_dir={work / 'cache'}", f"results_dir={work / 'results'}",
        *EXTRA.get(method, []),
    ]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    run_dir = work / method
    harness.run(cfg, run_dir)
    if not checkpoint_path(run_dir).is_file():
        pytest.skip(f"{method} does not apply to dcopf_14 (no checkpoint: {(run_dir / 'record.json').is_file()})")
    return run_dir


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("export")


def _check_export(run_dir: Path, out: Path) -> None:
    path = hardlinear.export(run_dir, out)
    program = torch.export.load(str(path)).module()
    method = hardlinear.load_run(run_dir)
    if hasattr(method, "fused_inference"):
        method.fused_inference = False  # the program is the unfused path (the fused one agrees to FUSED_RTOL)
    xi = check_inputs(method.problem, 100, seed=11)  # fresh inputs and the box's two corners
    with torch.no_grad():
        for rows in (xi, xi[:1], xi[:7]):  # any batch size: the program's batch dimension is dynamic
            live = method.predict(rows).y.double()  # at that batch size (a float32 product rounds by its shape)
            y = program(rows).double()
            scale = max(float(live.abs().max()), 1.0)
            assert float((y - live).abs().max()) / scale <= 1e-12, (run_dir.name, len(rows))


@pytest.mark.parametrize("method", FAST)
def test_the_exported_program_is_the_live_model(work, method, tmp_path):
    _check_export(_train(work, method), tmp_path / f"{method}.pt2")


@pytest.mark.slow
@pytest.mark.parametrize("method", SLOW)
def test_every_method_that_predicts_exports(work, method, tmp_path):
    _check_export(_train(work, method), tmp_path / f"{method}.pt2")


@pytest.mark.parametrize(("method", "why"), [
    ("optimizer", "its inference solves"),
    pytest.param("fsnet", "its inference runs L-BFGS with a line search", marks=pytest.mark.slow),
])
def test_a_method_that_calls_a_solver_says_why_it_cannot_export(work, method, why, tmp_path):
    run_dir = _train(work, method)
    with pytest.raises(CheckpointError, match=f"cannot be exported as a torch program: {why}"):
        hardlinear.export(run_dir, tmp_path / "x.pt2")
    assert not (tmp_path / "x.pt2").exists()


def test_torchscript_remains_on_request_for_the_refined_model(work, tmp_path):
    """kind='torchscript': the trace, which failed on the refined model's Douglas-Rachford loop before."""
    if not hasattr(torch.jit, "trace"):
        pytest.skip("this torch has no TorchScript")
    run_dir = _train(work, "proposed_refined")
    path = hardlinear.export(run_dir, tmp_path / "refined.pt", kind="torchscript")
    traced = torch.jit.load(str(path))
    method = hardlinear.load_run(run_dir)
    xi = check_inputs(method.problem, 50, seed=3)
    with torch.no_grad():
        assert float((traced(xi) - method.predict(xi).y).abs().max()) <= 1e-12 * max(1.0, float(traced(xi).abs().max()))


def test_reload_and_export_warn_nothing(work, tmp_path):
    """In a fresh interpreter with every warning an error: reload, predict, export and load the program."""
    run_dir = _train(work, "proposed_refined")
    program = f"""
import json, torch, hardlinear
method = hardlinear.load_run({str(run_dir)!r})
y = method.predict(method.problem.sample(3)).y
hardlinear.export({str(run_dir)!r}, "m.pt2")
program = torch.export.load("m.pt2").module()
print(json.dumps({{"shape": list(program(method.problem.sample(3).double()).shape)}}))
"""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT / "src"))
    done = subprocess.run([sys.executable, "-W", "error", "-c", program], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["shape"] == [3, 123]


def test_e2elr_on_the_dispatch_exports(tmp_path):
    """E2ELR's repairs on the economic dispatch record as a torch program (the dispatch's memo of the loads' flows,
    a data-dependent ``torch.equal``, stopped torch.export before) and equal the live model at any batch size."""
    overrides = [
        "problem=ed", "problem.case=pglib_opf_case14_ieee", "method=e2elr", "trainer=fast", "trainer.epochs=2",
        "network.hidden=16", "progress=false", "data.val_size=8", "data.test_size=8", "eval.throughput_batch=16",
        "eval.warmup=0", "eval.time_instances=2", f"cache_dir={tmp_path / 'cache'}", f"results_dir={tmp_path / 'results'}",
    ]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    harness.run(cfg, tmp_path / "e2elr")
    _check_export(tmp_path / "e2elr", tmp_path / "e2elr.pt2")
