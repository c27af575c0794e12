"""Issue 44 item 7: what the docs quote of the code is the code's. The reload tolerance docs/harness.md and
docs/reliability.md quote is recomputed from ``harness.reload.probe_tolerance`` on the problem they name."""

from __future__ import annotations

import re
from pathlib import Path

from hardlinear.harness.reload import probe_tolerance
from hardlinear.problems import build_problem

DOCS = Path(__file__).resolve().parents[1] / "docs"
CONFIG = Path(__file__).resolve().parents[1] / "conf" / "config.yaml"
NETWORK = {"hidden": 256, "layers": 2}  # "the default network (2 x 256)", as the docs say


def test_the_default_network_is_the_one_the_docs_name():
    from omegaconf import OmegaConf

    network = OmegaConf.load(CONFIG).network
    assert {"hidden": network.hidden, "layers": network.layers} == NETWORK


def _dcopf_14_sizes() -> dict[str, int]:
    return build_problem("dcopf_14", objective="lp", form="standard", uncertainty=0.4).sizes()


def test_harness_docs_quote_the_derived_reload_tolerance():
    text = " ".join((DOCS / "harness.md").read_text().split())
    assert "PROBE_RTOL = 1e-12" not in text  # the fixed tolerance the code no longer uses
    found = re.search(r"On dcopf_14 \(n = (\d+), m = (\d+), k = (\d+)\) with the default network \(2 x 256\) that is "
                      r"`([0-9.e+-]+)` in float32 and `([0-9.e+-]+)` in float64", text)
    assert found, "docs/harness.md no longer quotes the reload tolerance in the form this test reads"
    sizes = _dcopf_14_sizes()
    assert [int(found.group(i)) for i in (1, 2, 3)] == [sizes["n"], sizes["m_eq"] + sizes["m_ineq"], sizes["k"]]
    for dtype, quoted in (("float32", found.group(4)), ("float64", found.group(5))):
        tolerance, _ = probe_tolerance({"dtype": dtype, "network": NETWORK}, sizes)
        assert quoted == f"{tolerance:.2g}", f"{dtype}: docs say {quoted}, the code derives {tolerance:.2g}"


def test_reliability_table_quotes_the_same_tolerance():
    text = " ".join((DOCS / "reliability.md").read_text().split())
    found = re.search(r"probe_tolerance`: ([0-9.e+-]+) relative for a float32 network of 2 x 256 on dcopf_14, ([0-9.e+-]+) in float64", text)
    assert found
    sizes = _dcopf_14_sizes()
    expected = [f"{probe_tolerance({'dtype': d, 'network': NETWORK}, sizes)[0]:.2g}" for d in ("float32", "float64")]
    assert [found.group(1), found.group(2)] == expected
