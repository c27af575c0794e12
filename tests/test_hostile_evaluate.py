"""Issue 29, items 7 and 8 (the probe): ``evaluate.py`` publishes all of its outputs or none, never into an existing
``--out``; a checkpoint whose probe was deleted is refused unless asked for loudly; a (0, k) inputs file is a
clear error."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir

from hardlinear.harness import results, runner
from hardlinear.harness.checkpoint import CheckpointError, checkpoint_path, load_run, read_checkpoint
from hardlinear.harness.reevaluate import evaluate_run

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """One finished dcopf_14 run of the decision rule alone (nothing trained: seconds)."""
    work = tmp_path_factory.mktemp("hostile_eval")
    overrides = [
        "problem=dcopf_14", "method=ldr", "trainer=fast", "progress=false", "data.val_size=5", "data.test_size=5",
        "eval.throughput_batch=8", "eval.warmup=0", "eval.time_instances=2", f"cache_dir={work / 'cache'}",
        f"results_dir={work / 'results'}",
    ]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    runner.run(cfg, work / "run")
    return work / "run"


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_an_existing_out_is_refused_before_work_and_left_as_it_was(run_dir, tmp_path):
    out = tmp_path / "out"
    evaluate_run(run_dir, test_size=3, test_seed=7, out_dir=out)
    before = _snapshot(out)
    with pytest.raises(FileExistsError, match="--out .* exists"):
        evaluate_run(run_dir, test_size=4, test_seed=8, out_dir=out)
    assert _snapshot(out) == before  # predictions and metrics still match the record beside them
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging folder left


def test_a_failure_while_writing_leaves_no_out_and_no_half_folder(run_dir, tmp_path, monkeypatch):
    def full(*_a, **_k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(results, "write_record", full)
    out = tmp_path / "out"
    with pytest.raises(OSError, match="No space left"):
        evaluate_run(run_dir, test_size=3, test_seed=7, out_dir=out)
    assert list(tmp_path.iterdir()) == []


def test_outputs_are_published_together(run_dir, tmp_path):
    out = tmp_path / "out"
    row = evaluate_run(run_dir, test_size=3, test_seed=7, out_dir=out)
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json", "per_instance.csv", "predictions.npz", "record.json"]
    assert json.loads((out / "metrics.json").read_text())["data.test_size"] == 3 == row["data.test_size"]
    record = results.read_record(out / "record.json")  # its run_dir: where it was published, not where it was staged
    assert record["row"]["run_dir"] == results.stored_run_dir(out, record["config"].get("results_dir"))
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def _without_probe(run_dir: Path, tmp_path: Path, rule: tuple[str, ...] = ()) -> Path:
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    payload = read_checkpoint(copy)
    payload["probe"] = None
    scaled = rule if rule else ()  # the rule is verified against the problem on reload (issue 60): scaled only when asked
    payload["state_dict"] = {k: v * 100 if torch.is_tensor(v) and torch.is_floating_point(v)
                             and (not k.startswith(("rule.", "layer.safe.")) or k in scaled) else v
                             for k, v in payload["state_dict"].items()}
    torch.save(payload, checkpoint_path(copy))
    return copy


def test_a_checkpoint_without_its_probe_is_refused(run_dir, tmp_path):
    copy = _without_probe(run_dir, tmp_path)
    with pytest.raises(CheckpointError, match="has no usable probe.*allow_missing_probe=True"):
        load_run(copy)
    with pytest.warns(UserWarning, match="loaded UNCHECKED"):
        load_run(copy, allow_missing_probe=True)
    # without a probe the rule is still checked: its margins over the box are recomputed (issue 60)
    edited = _without_probe(run_dir, tmp_path / "edited", rule=("rule.linear",))
    with pytest.raises(CheckpointError, match="decision rule does not hold"), pytest.warns(UserWarning, match="UNCHECKED"):
        load_run(edited, allow_missing_probe=True)


def test_evaluate_cli_refuses_a_probeless_checkpoint_and_a_zero_row_inputs_file(run_dir, tmp_path):
    copy = _without_probe(run_dir, tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), str(copy)], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 1 and "no usable probe" in out.stderr and "--allow-missing-probe" in out.stderr
    assert "Traceback" not in out.stderr
    empty = tmp_path / "empty.npy"
    np.save(empty, np.zeros((0, 14)))
    out = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), str(run_dir), "--inputs", str(empty), "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 1 and "have no rows" in out.stderr and "Traceback" not in out.stderr, out.stderr[-1500:]
    assert not (tmp_path / "o").exists()


# --- issue 43: an unusable --out, a huge --test-size and inputs outside the box, each one line before any work ------
@pytest.mark.parametrize("where", ["under-a-file", "proc"])
def test_an_out_that_cannot_be_made_is_named_before_any_work(run_dir, tmp_path, where):
    if where == "under-a-file":
        (tmp_path / "a-file").write_text("x")
        out, expected = tmp_path / "a-file" / "sub", r"--out .*a-file/sub cannot be created: .*a-file is a file, not a folder"
    else:
        out, expected = Path("/proc/hardlinear-eval"), r"--out /proc/hardlinear-eval cannot be written \(/proc: "
    with pytest.raises(ValueError, match=expected) as info:
        evaluate_run(run_dir, test_size=3, test_seed=7, out_dir=out)
    assert ".partial" not in str(info.value)


def test_a_test_size_beyond_any_evaluation_is_refused_before_work(run_dir):
    with pytest.raises(ValueError, match=r"--test-size must be in \[1, 10,000,000\] .*; got 1,000,000,000"):
        evaluate_run(run_dir, test_size=10**9)


def test_inputs_outside_the_box_are_named_not_a_solver_traceback(run_dir, tmp_path):
    box = load_run(run_dir).problem.box
    xi = np.vstack([box.mid, np.asarray(box.hi) * 3.0])
    path = tmp_path / "far.npy"
    np.save(path, xi)
    with pytest.raises(ValueError, match=r"inputs in .*far.npy: 1 rows lie outside the input box \(first: row 1, .*widen lo/hi"):
        evaluate_run(run_dir, inputs=path, out_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()
