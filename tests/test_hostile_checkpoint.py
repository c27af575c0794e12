"""Issue 29, item 1: a crafted ``checkpoint.pt`` must not run anything but this package's method classes.

The payloads are the issue's: ``numpy.savetxt`` writing a shell script to a chosen path, ``builtins.open`` truncating
a file, and the same hidden one level down. Each load must fail with a message that says why, and leave the
file system as it was."""

from pathlib import Path

import pytest
import torch
import yaml

from hardlinear.harness.checkpoint import FORMAT_VERSION, CheckpointError, load_run
from hardlinear.harness.trusted import UntrustedConfig, check_stored_config, trusted_method_targets

ROOT = Path(__file__).resolve().parents[1]
BASE = {"problem": {"name": "dcopf", "case": "pglib_opf_case14_ieee"}, "seed": 0, "dtype": "float32"}


def _plant(run_dir: Path, method: dict, **top) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    payload = {"format": FORMAT_VERSION, "method": "proposed", "config": {**BASE, **top, "method": method}, "state_dict": {}, "probe": None}
    torch.save(payload, run_dir / "checkpoint.pt")
    return run_dir


def test_numpy_savetxt_payload_writes_no_file(tmp_path):
    script = tmp_path / "evil.sh"
    run = _plant(tmp_path / "run", {"_target_": "numpy.savetxt", "_args_": [str(script), [0.0]], "header": "touch /tmp/pwned", "comments": ""})
    with pytest.raises(CheckpointError, match=r"refused to load.*_args_|refused to load.*numpy.savetxt"):
        load_run(run)
    assert not script.exists()


def test_builtins_open_payload_truncates_nothing(tmp_path):
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    run = _plant(tmp_path / "run", {"_target_": "builtins.open", "file": str(victim), "mode": "w"})
    with pytest.raises(CheckpointError, match=r"method._target_ 'builtins.open' is not one of hardlinear's method classes"):
        load_run(run)
    assert victim.read_text() == "keep me"


@pytest.mark.parametrize("where", ["option", "top", "list"])
def test_a_nested_target_anywhere_is_refused(tmp_path, where):
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    evil = {"_target_": "builtins.open", "file": str(victim), "mode": "w"}
    method = {"_target_": "hardlinear.methods.proposed.Proposed", "name": "proposed"}
    if where == "option":
        method["gradient"] = evil
        run = _plant(tmp_path / "run", method)
    elif where == "top":
        run = _plant(tmp_path / "run", method, network=evil)
    else:
        run = _plant(tmp_path / "run", method, data={"solver": [1, evil]})
    with pytest.raises(CheckpointError, match=r"refused to load: its config sets .*_target_"):
        load_run(run)
    assert victim.read_text() == "keep me"


def test_a_method_class_of_another_module_is_refused():
    """A Method subclass outside hardlinear.methods (or any class of ours that is not a method) is not trusted."""
    for target in ("hardlinear.harness.sweep.SweepProgress", "hardlinear.methods.base.Method", "os.system"):
        with pytest.raises(UntrustedConfig, match="is not one of hardlinear's method classes"):
            check_stored_config({"method": {"_target_": target}})


def test_a_config_deeper_than_any_run_is_refused_without_recursing():
    deep: dict = {}
    node = deep
    for _ in range(100_000):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(UntrustedConfig, match="nests deeper than"):
        check_stored_config({"method": {"_target_": "hardlinear.methods.proposed.Proposed"}, "extra": deep})


def test_the_allow_list_is_discovered_and_covers_every_configured_method():
    """No hand-kept list: every conf/method/*.yaml target is trusted because its class is a Method in
    hardlinear.methods (a new method module joins by itself)."""
    allowed = trusted_method_targets()
    for path in sorted((ROOT / "conf" / "method").glob("*.yaml")):
        target = yaml.safe_load(path.read_text()).get("_target_")
        if target is None:  # a variant of another method's config (defaults:)
            continue
        assert target in allowed, f"{path.name}: {target} is not trusted"
        assert check_stored_config({"method": {"_target_": target}}) is allowed[target]
