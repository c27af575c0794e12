"""DC3 on the economic dispatch as the E2ELR paper ran it (``method.thermal=soft``): the network predicts the
generator outputs, the correction acts on their limits, the thermal slacks follow from the dispatch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hardlinear.methods.base import Context
from hardlinear.methods.dc3 import DC3
from hardlinear.problems import build_problem
from hardlinear.problems.ed import EconomicDispatch


@pytest.fixture(scope="module")
def ed():
    return EconomicDispatch("pglib_opf_case14_ieee", form="inequality", zero_pmin=True, flows="sparse")


def test_the_generator_family_holds_the_balance_and_the_limits_on_pg_alone(ed):
    family, pg = ed.generator_family(), ed.variable_slices()["pg"]
    g = pg.stop - pg.start
    assert family.n == g and family.m_eq == ed.family.m_eq
    # every kept row is a generator limit: one nonzero, +-1
    H = family.H.toarray()
    assert family.m_ineq > 0 and np.all((H != 0).sum(axis=1) == 1) and set(np.abs(H[H != 0])) == {1.0}
    xi = ed.sample(8, torch.Generator().manual_seed(0)).double()
    pmax = torch.as_tensor(ed.network.pmax, dtype=torch.float64)
    inside = 0.5 * pmax.expand(8, -1)
    outside = 2.0 * pmax.expand(8, -1) + 1.0
    assert float(family.ineq_resid(xi, inside).max()) <= 0.0 < float(family.ineq_resid(xi, outside).max())


def test_soft_thermal_dc3_outputs_the_dispatch_with_its_smallest_slack(ed):
    method = DC3(thermal="soft", train_steps=5, max_iter=50, layer_dtype="float64")
    method.setup(ed, Context(cache_dir=None, progress=False))
    hard = DC3(layer_dtype="float64")
    hard.setup(ed, Context(cache_dir=None, progress=False))
    assert method.correction.completion.n_partial < hard.correction.completion.n_partial  # the slacks are not predicted
    xi = ed.sample(16, torch.Generator().manual_seed(1))
    method.train()
    y = method(xi)
    loss = method.loss(xi, y)
    loss.backward()
    assert torch.isfinite(loss) and any(float(p.grad.abs().max()) > 0 for p in method.net.parameters())
    method.eval()
    y = method.predict(xi).y
    assert y.shape == (16, ed.n)
    pg = y[:, ed.variable_slices()["pg"]]
    assert torch.allclose(y, ed.with_thermal_slack(xi.double(), pg))  # the slacks are the dispatch's own
    scale = 1.0 + ed.loads(xi.double()).abs().sum(dim=1)
    assert float((ed.eq_resid(xi.double(), y).abs().amax(dim=1) / scale).max()) <= 1e-12  # the completion's balance
    assert method.describe()["variant"] == "thermal=soft" and hard.describe()["variant"] == ""


def test_soft_thermal_dc3_refuses_a_problem_that_is_not_a_dispatch_before_any_work():
    with pytest.raises(ValueError, match="method.thermal=hard"):
        DC3(thermal="soft").setup(build_problem("dcopf_14"), Context(cache_dir=None, progress=False))
    with pytest.raises(ValueError, match="set problem.form=inequality"):
        DC3(thermal="soft").setup(EconomicDispatch("pglib_opf_case14_ieee", form="standard"), Context(cache_dir=None, progress=False))
    with pytest.raises(ValueError, match="method.thermal must be one of"):
        DC3(thermal="medium")
