"""scripts/maintainers/solution_structure.py: the diagnostic behind docs/reproduction.md's 118-bus QP explanation."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def structure(load_script):
    return load_script("solution_structure").structure


def test_exact_optimum_passes_the_layer_and_noise_costs_the_lp_more(structure, tmp_path):
    """eps = 0: the optimum is feasible, so the blend leaves it (gap ~ 0). With noise the LP, whose optimum binds
    a row, loses more than the QP, whose optimum binds none (dcopf_14: 1 against 0 binding rows)."""
    lp = structure("dcopf_14", "lp", 20, 0, [0.0, 1e-2], str(tmp_path))
    qp = structure("dcopf_14", "qp", 20, 0, [0.0, 1e-2], str(tmp_path))
    for r in (lp, qp):
        assert abs(r["blends"][0.0]["gap"]) < 1e-6 and r["blends"][0.0]["alpha"] < 1e-6
    assert lp["quadratic_share"] == 0.0 and 0.0 < qp["quadratic_share"] < 1.0
    assert lp["active_mean"] >= 1 and qp["active_mean"] < lp["active_mean"]
    assert lp["blends"][1e-2]["moved"] > 0 and lp["blends"][1e-2]["gap"] > qp["blends"][1e-2]["gap"]
