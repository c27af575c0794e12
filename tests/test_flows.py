"""Line flows through the sparse factor of Bbus (hardlinear.problems.flows) against the dense PTDF."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hardlinear.problems.dcopf import branch_susceptance, load_network
from hardlinear.problems.ed import ptdf_matrix
from hardlinear.problems.flows import SparseFlows, pick_flows


def _flows(case: str) -> tuple[SparseFlows, np.ndarray, object]:
    net = load_network(case)
    lines = np.flatnonzero(net.rate_a > 0)
    flows = SparseFlows(net.f_bus, net.t_bus, branch_susceptance(net, "paper"), len(net.bus_ids), net.ref, lines)
    return flows, ptdf_matrix(net)[lines], net


@pytest.mark.parametrize("case", ["pglib_opf_case14_ieee", "pglib_opf_case118_ieee"])
def test_sparse_flows_equal_the_dense_ptdf(case):
    flows, ptdf, net = _flows(case)
    buses = np.r_[net.gen_bus, np.flatnonzero(net.pd != 0)]  # several entries per bus, the reference bus among them
    assert net.ref in buses
    u = torch.randn(7, len(buses), dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    sparse = flows.flows(flows.injections(u, buses))
    dense = u @ torch.as_tensor(ptdf[:, buses]).T
    scale = (u.abs() @ torch.as_tensor(np.abs(ptdf[:, buses])).T).amax()
    assert float((sparse - dense).abs().max() / scale) < 1e-12
    np.testing.assert_allclose(flows.ptdf_columns(np.arange(len(net.bus_ids))), ptdf, rtol=0, atol=1e-12 * np.abs(ptdf).max())


def test_sparse_flows_gradient_is_the_ptdf_transpose():
    flows, _, net = _flows("pglib_opf_case14_ieee")
    buses = np.r_[net.gen_bus, np.flatnonzero(net.pd != 0)]
    u = torch.randn(3, len(buses), dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v: flows.flows(flows.injections(v, buses)), (u,), eps=1e-6, atol=1e-9)


def test_float32_inputs_come_back_float32():
    flows, ptdf, net = _flows("pglib_opf_case14_ieee")
    u = torch.ones(2, len(net.gen_bus))
    out = flows.flows(flows.injections(u, net.gen_bus))
    assert out.dtype == torch.float32
    np.testing.assert_allclose(out[0].numpy(), ptdf[:, net.gen_bus].sum(axis=1), rtol=1e-5, atol=1e-6)


def test_pick_flows_names_the_modes():
    with pytest.raises(ValueError, match="flows must be one of"):
        pick_flows("fast", "cpu", lambda: None, lambda: None)
    assert pick_flows("auto", "cuda", lambda: None, lambda: None)[0] == "dense"
    chosen, timings = pick_flows("auto", "cpu", lambda: sum(range(10)), lambda: sum(range(100_000)))
    assert chosen == "sparse" and timings["sparse_s"] < timings["dense_s"]
