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
