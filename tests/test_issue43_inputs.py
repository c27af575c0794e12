"""Issue 43, item 2: the last unclear and silent inputs, each answered by one line naming the fix before any
expensive work."""

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from hardlinear.harness import runner as harness
from hardlinear.harness.schemas import ConfigError

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"


def _cfg(tmp_path: Path, *overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=[
            "problem=dcopf_14", "trainer=fast", "progress=false", f"cache_dir={tmp_path / 'cache'}",
            f"results_dir={tmp_path / 'results'}", *overrides,
        ])


def test_resume_with_a_method_that_trains_nothing_is_refused_before_any_work(tmp_path):
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "last.pt").write_bytes(b"")  # the resume check looks no further before the method is known
    cfg = _cfg(tmp_path, "method=ldr", f"trainer.resume={earlier}")
    with pytest.raises(ConfigError, match=r"trainer.resume=.* but method ldr trains nothing here.*drop trainer.resume"):
        harness.run(cfg, tmp_path / "run")
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    assert record["status"] == "failed" and "trains nothing" in record["reason"]
    assert not (tmp_path / "cache").exists(), "a rule or a dataset was built before the refusal"


def test_a_failed_record_keeps_the_constructors_message_not_hydras_wrapper():
    with pytest.raises(Exception) as info:
        instantiate({"_target_": "hardlinear.methods.pinet.Pinet", "bwd_tol": float("nan")})
    assert type(info.value).__name__ == "InstantiationException"
    reason = harness.failure_reason(info.value)
    assert reason.startswith("ValueError: bwd_tol must be a finite number >= 0"), reason


# --- arrays: text, complex, 1e300 and 1e-300 entries named by key; a layer with no outputs; a callable that raises ---
import numpy as np  # noqa: E402

from hardlinear import LinearConstraints  # noqa: E402
from hardlinear.problems.linear import LinearProblem  # noqa: E402

SMALL = {"c": np.array([1.0, 2.0]), "H": -np.eye(2), "h0": np.zeros(2), "Hx": np.eye(2), "lo": np.ones(2), "hi": 2 * np.ones(2)}


@pytest.mark.parametrize(("change", "message"), [
    ({"c": np.array(["1", "2"])}, r"c must be a real numeric array; it holds text \(dtype <U1\)"),
    ({"c": np.array([1 + 1j, 2.0])}, r"c must be a real numeric array; it is complex \(imaginary parts up to 1\)"),
    ({"H": np.array([[-1e300, 0.0], [0.0, -1.0]])}, r"H has 1 entries of magnitude above 1e\+150 \(first at index \[0, 0\]: -1e\+300\)"),
    ({"H": np.array([[-1.0, 1e-300], [0.0, -1.0]])}, r"H has 1 entries of magnitude non-zero and below 1e-150 \(first at index \[0, 1\]"),
    ({"h0": np.array([1e300, 0.0])}, r"h0 has 1 entries of magnitude above 1e\+150"),
], ids=["c-text", "c-complex", "H-1e300", "H-1e-300", "h0-1e300"])
def test_an_npz_array_out_of_range_is_named_before_any_solve(tmp_path, change, message):
    path = tmp_path / "p.npz"
    np.savez(path, **{**SMALL, **change})
    with pytest.raises(ValueError, match=message):
        LinearProblem(path=str(path))


def test_a_layer_with_no_outputs_is_refused():
    with pytest.raises(ValueError, match="G and H have 0 columns: a layer needs at least one output variable"):
        LinearConstraints(np.zeros(1), np.ones(1), H=np.zeros((2, 0)), h=np.ones(2))


def test_a_callable_that_raises_is_reported_as_the_users_with_the_input():
    def H(theta):
        raise ZeroDivisionError("my bug")

    with pytest.raises(ValueError, match=r"H\(theta\) raised ZeroDivisionError: my bug \(called at theta = .*\); H must return"):
        LinearConstraints(np.zeros(1), np.ones(1), H=H, h=np.ones(2))


@pytest.mark.parametrize(("H", "message"), [
    (np.array([[1e300, 0.0], [0.0, 1.0]]), "H has 1 entries of magnitude above 1e+150"),
    (np.array([[1e-300, 1.0], [0.0, 1.0]]), "H has 1 entries of magnitude non-zero and below 1e-150"),
])
def test_layer_entries_out_of_float64s_working_range_are_named(H, message):
    with pytest.raises(ValueError) as info:
        LinearConstraints(np.zeros(1), np.ones(1), H=H, h=np.ones(2))
    assert message in str(info.value)


def test_run_py_threads_100000_is_one_line_not_a_segfault(tmp_path):
    """run.py sized OpenBLAS's pool from threads before validating it: 100000 threads segfaulted, no record."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "run.py", "threads=100000", "trainer=fast", f"cache_dir={tmp_path / 'c'}",
                          f"results_dir={tmp_path / 'r'}", f"hydra.run.dir={tmp_path / 'run'}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, (out.returncode, out.stderr[-2000:])
    assert "error: threads must be in [1, 1024]; got 100000" in out.stderr
    assert not (tmp_path / "c").exists()


# --- feasibility_layer's cache folder: checked before any solving, in one line --------------------------------------
def _box_constraints():
    return LinearConstraints(np.zeros(1), np.ones(1), H=np.vstack([np.eye(2), -np.eye(2)]), h=(np.ones(4), np.zeros((4, 1))))


@pytest.mark.parametrize("where", ["file", "proc"])
def test_a_cache_dir_that_cannot_hold_the_rule_is_one_line(tmp_path, where):
    from hardlinear import feasibility_layer

    if where == "file":
        cache = tmp_path / "a-file"
        cache.write_text("x")
        expected = r"cache_dir='.*a-file' cannot hold the rule cache \((NotADirectoryError|FileExistsError): .*\); give a writable folder"
    else:
        cache = Path("/proc/hardlinear-cache")
        expected = r"cache_dir='/proc/hardlinear-cache' cannot hold the rule cache \(.*\); give a writable folder"
    with pytest.raises(ValueError, match=expected):
        feasibility_layer(_box_constraints(), cache_dir=cache, progress=False)


def test_a_folder_where_the_rule_cache_file_goes_is_named(tmp_path):
    from hardlinear import feasibility_layer

    feasibility_layer(_box_constraints(), cache_dir=tmp_path, progress=False)
    (cached,) = (tmp_path / "decision_rules").glob("*.rule")
    cached.unlink()
    cached.mkdir()
    with pytest.raises(ValueError, match="a folder sits where the rule's cache file goes"):
        feasibility_layer(_box_constraints(), cache_dir=tmp_path, progress=False)
