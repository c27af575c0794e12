"""Issue 60, item 4: a grid problem is rebuilt from what its checkpoint stores (``rebuild_arrays``), equal to the one
built from its PGLib case, and stored arrays that do not make a grid are refused with the field named."""

import numpy as np
import pytest

from hardlinear.problems import build_problem
from hardlinear.problems.dcopf import network_from_arrays


@pytest.mark.parametrize(("name", "options"), [
    ("dcopf_14", {}),
    ("dcopf_14", {"objective": "qp"}),  # pandapower's quadratic costs travel with the grid
    ("dcopf", {"case": "pglib_opf_case30_ieee", "inputs": "loaded_buses", "susceptance": "matpower"}),
    ("ed", {"case": "pglib_opf_case14_ieee"}),
])
def test_a_grid_rebuilt_from_its_stored_arrays_is_the_same_problem(name, options):
    built = build_problem(name, **options)
    stored = built.rebuild_arrays()
    again = build_problem(name, stored=stored, **options)
    assert again.fingerprint() == built.fingerprint() and again.name == built.name
    if options.get("objective") == "qp":
        assert stored["matpower_c2"] is not None and np.any(stored["matpower_c2"] != 0)


def test_stored_arrays_that_make_no_grid_are_refused_naming_the_field():
    stored = build_problem("dcopf_14").rebuild_arrays()
    network = dict(stored["network"])
    with pytest.raises(ValueError, match="gen_bus names a bus outside 0..13"):
        network_from_arrays({**network, "gen_bus": network["gen_bus"] + 100})
    with pytest.raises(ValueError, match="pmax has 3 entries, its other ng arrays 5"):
        network_from_arrays({**network, "pmax": network["pmax"][:3]})
    with pytest.raises(ValueError, match="lacks rate_a"):
        network_from_arrays({k: v for k, v in network.items() if k != "rate_a"})
    with pytest.raises(ValueError, match="the given network is pglib_opf_case14_ieee, not pglib_opf_case30_ieee"):
        build_problem("dcopf", case="pglib_opf_case30_ieee", stored=stored)
    with pytest.raises(ValueError, match="Portfolio takes no stored matpower_c2, network"):
        build_problem("portfolio", stored=stored)
