"""Line flows through the sparse factor of Bbus (hardlinear.problems.flows) against the dense PTDF."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hardlinear.problems import ed as ed_module
from hardlinear.problems.dcopf import branch_susceptance, load_network
from hardlinear.problems.ed import dense_ptdf_reference, ptdf_matrix
from hardlinear.problems.flows import SparseFlows, pick_flows


def _flows(case: str) -> tuple[SparseFlows, np.ndarray, object]:
    net = load_network(case)
    lines = np.flatnonzero(net.rate_a > 0)
    flows = SparseFlows(net.f_bus, net.t_bus, branch_susceptance(net, "paper"), len(net.bus_ids), net.ref, lines)
    return flows, dense_ptdf_reference(net)[lines], net


@pytest.mark.parametrize("case", ["pglib_opf_case14_ieee", "pglib_opf_case118_ieee", "pglib_opf_case300_ieee"])
def test_ptdf_by_the_factor_equals_the_dense_solve(case, monkeypatch):
    """case300's Bbus is not positive definite (a negative reactance): the factor is SuperLU's there, CHOLMOD's on
    the others; a block of 50 lines makes the larger cases solve in several blocks."""
    monkeypatch.setattr(ed_module, "PTDF_CHUNK", 50)
    net = load_network(case)
    got, want = ptdf_matrix(net), dense_ptdf_reference(net)
    assert got.shape == want.shape and not got[:, net.ref].any()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize("case", ["pglib_opf_case14_ieee", "pglib_opf_case118_ieee"])
def test_sparse_flows_equal_the_dense_ptdf(case):
    flows, ptdf, net = _flows(case)
    buses = np.r_[net.gen_bus, np.flatnonzero(net.pd != 0)]  # several entries per bus, the reference bus among them
    assert net.ref in buses
    u = torch.randn(7, len(buses), dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    sparse = flows.flows(u, buses)
    dense = u @ torch.as_tensor(ptdf[:, buses]).T
    scale = (u.abs() @ torch.as_tensor(np.abs(ptdf[:, buses])).T).amax()
    assert float((sparse - dense).abs().max() / scale) < 1e-12
    np.testing.assert_allclose(flows.ptdf_columns(np.arange(len(net.bus_ids))), ptdf, rtol=0, atol=1e-12 * np.abs(ptdf).max())


def test_sparse_flows_gradient_is_the_ptdf_transpose():
    flows, _, net = _flows("pglib_opf_case14_ieee")
    buses = np.r_[net.gen_bus, np.flatnonzero(net.pd != 0)]
    u = torch.randn(3, len(buses), dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v: flows.flows(v, buses), (u,), eps=1e-6, atol=1e-9)


def test_float32_inputs_come_back_float32():
    flows, ptdf, net = _flows("pglib_opf_case14_ieee")
    u = torch.ones(2, len(net.gen_bus))
    out = flows.flows(u, net.gen_bus)
    assert out.dtype == torch.float32
    np.testing.assert_allclose(out[0].numpy(), ptdf[:, net.gen_bus].sum(axis=1), rtol=1e-5, atol=1e-6)


def test_pick_flows_names_the_modes():
    with pytest.raises(ValueError, match="flows must be one of"):
        pick_flows("fast", "cpu", lambda: None, lambda: None)
    assert pick_flows("auto", "cuda", lambda: None, lambda: None)[0] == "dense"
    chosen, timings = pick_flows("auto", "cpu", lambda: sum(range(10)), lambda: sum(range(100_000)))
    assert chosen == "sparse" and timings["sparse_s"] < timings["dense_s"]


# --- the dispatch's line rows, both ways ------------------------------------------------------------------
from hardlinear.problems.ed import EconomicDispatch  # noqa: E402


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / (1.0 + b.abs().max()))


@pytest.fixture(scope="module", params=["standard", "inequality"])
def dispatches(request):
    case = "pglib_opf_case118_ieee"
    return EconomicDispatch(case, form=request.param, flows="sparse"), EconomicDispatch(case, form=request.param, flows="dense")


def _dispatch_points(ed: EconomicDispatch, n: int = 6):
    gen = torch.Generator().manual_seed(3)
    xi = ed.sample(n, generator=gen)
    pmin, pmax = (torch.as_tensor(v) for v in (ed.network.pmin, ed.network.pmax))
    # within the limits and unbalanced: several lines carry slack
    pg = pmin + (pmax - pmin) * torch.rand(n, len(pmin), generator=gen, dtype=torch.float64)
    return xi, pg


def test_dispatch_rows_agree_sparse_and_dense(dispatches):
    sparse, dense = dispatches
    assert sparse.flow_mode(torch.zeros(1)) == "sparse" and dense.flow_mode(torch.zeros(1)) == "dense"
    xi, pg = _dispatch_points(sparse)
    assert _rel(sparse.line_flows(xi, pg), dense.line_flows(xi, pg)) < 1e-12
    df_s, df_d = sparse.thermal_slack(xi, pg), dense.thermal_slack(xi, pg)
    assert int((df_d > 0).sum()) > 5  # some lines over their limits
    assert _rel(df_s, df_d) < 1e-12
    y_s, y_d = sparse.with_thermal_slack(xi, pg), dense.with_thermal_slack(xi, pg)
    assert _rel(y_s, y_d) < 1e-12
    for name in ("eq_resid", "ineq_resid"):
        assert _rel(getattr(sparse, name)(xi, y_d), getattr(dense, name)(xi, y_d)) < 1e-12, name
    # the slack makes every line row hold when the rows are evaluated the other way (the rounding guard)
    n0 = sparse.n_orig
    assert float(dense.compact_slack(xi, y_s[:, :n0]).min()) >= 0.0 and float(sparse.compact_slack(xi, y_d[:, :n0]).min()) >= 0.0


def test_dispatch_gradients_agree_sparse_and_dense(dispatches):
    sparse, dense = dispatches
    xi, pg = _dispatch_points(sparse, 3)
    grads = []
    for ed in (sparse, dense):
        p = pg.clone().requires_grad_(True)
        (ed.with_thermal_slack(xi, p) ** 2).sum().backward()
        grads.append(p.grad)
    assert _rel(grads[0], grads[1]) < 1e-12


def test_dispatch_flow_setting_is_checked():
    with pytest.raises(ValueError, match="flows must be one of"):
        EconomicDispatch("pglib_opf_case14_ieee", flows="fast")
    auto = EconomicDispatch("pglib_opf_case14_ieee")
    assert auto.flow_mode(torch.zeros(1)) in ("sparse", "dense") and set(auto.flow_timings) == {"sparse_s", "dense_s"}


@pytest.mark.parametrize("form", ["standard", "inequality"])
@pytest.mark.parametrize("geometry", ["euclidean", "entropic", "proportional"])
def test_dispatch_blend_equals_the_unfused_layer(geometry, form):
    """Proposed.predict with refine=problem runs DispatchBlend (no dense projection, flows through the factor); the
    unfused layer gives the same outputs up to the projection's rounding."""
    from hardlinear.layers.dispatch_blend import DispatchBlend
    from hardlinear.methods.base import Context
    from hardlinear.methods.proposed import Proposed

    ed = EconomicDispatch("pglib_opf_case14_ieee", form=form, flows="sparse")
    m = Proposed(refine="problem", slack_repair="both", refine_geometry=geometry, output_scale=True)
    m.setup(ed, Context(cache_dir=None, dtype=torch.float64))
    m.eval()
    assert isinstance(m.fused_module(), DispatchBlend)
    xi = torch.cat([ed.sample(32, torch.Generator().manual_seed(2)), torch.ones(2, ed.k), -torch.ones(2, ed.k)])
    with torch.no_grad():
        fast = m.predict(xi).y
        m.fused_inference = False
        slow = m.predict(xi).y
    assert _rel(fast, slow) < 1e-12
    assert float(ed.ineq_resid(xi, fast).max()) <= 0.0


@pytest.mark.parametrize("geometry", ["entropic", "proportional"])
@pytest.mark.parametrize("form", ["standard", "inequality"])
def test_dispatch_training_path_equals_the_layer(form, geometry):
    """A training step through the dispatch's path (Proposed.forward, training) gives the layer's outputs, loss and
    weight gradients to rounding; a batch with a few hostile rows sends just those through the layer."""
    from hardlinear.methods.base import Context
    from hardlinear.methods.proposed import Proposed

    ed = EconomicDispatch("pglib_opf_case14_ieee", form=form, flows="sparse")
    m = Proposed(refine="problem", slack_repair="both", refine_geometry=geometry, output_scale=True, guard_gradient=False)
    m.setup(ed, Context(cache_dir=None, dtype=torch.float64))
    m.train()
    xi = ed.sample(32, torch.Generator().manual_seed(6))
    results = []
    for fused in (True, False):
        m.fused_training = fused
        assert m._trains_by_dispatch_path() is fused
        m.zero_grad()
        y = m(xi)
        loss = m.loss(xi, y)
        loss.backward()
        results.append((y.detach(), loss.detach(), [p.grad.clone() for p in m.net.parameters()]))
    (y_fast, loss_fast, g_fast), (y_slow, loss_slow, g_slow) = results
    assert _rel(y_fast, y_slow) < 1e-12 and _rel(loss_fast, loss_slow) < 1e-12
    assert any(float(g.abs().max()) > 0 for g in g_slow)
    for a, b in zip(g_fast, g_slow):
        assert _rel(a, b) < 1e-9
    assert float(ed.ineq_resid(xi, y_fast).max()) <= 0.0
    m.guard_gradient = True  # alpha from the rounding guard alone has a gradient there: the layer's path
    assert not m._trains_by_dispatch_path()
    m.guard_gradient, m.refine_geometry = False, "euclidean"  # generators on their limits: the layer's path
    assert not m._trains_by_dispatch_path()


@pytest.mark.parametrize("kind", ["huge", "nan"])
def test_dispatch_blend_sends_hostile_rows_to_the_layer(kind):
    """Rows whose refinement is not exact (a NaN output; a huge one, balanced only to its own size's rounding) take
    the layer's path; the output stays feasible in both forms' rows, evaluated both ways."""
    from hardlinear.methods.base import Context
    from hardlinear.methods.proposed import Proposed

    ed = EconomicDispatch("pglib_opf_case14_ieee", form="inequality", flows="sparse")
    m = Proposed(refine="problem", slack_repair="both", refine_geometry="euclidean")
    m.setup(ed, Context(cache_dir=None, dtype=torch.float64))
    m.eval()
    xi = ed.sample(16, torch.Generator().manual_seed(4))
    out = 1e6 * torch.randn(16, ed.n, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    if kind == "nan":
        out[::3, 1] = float("nan")

    class Fixed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return out[: x.shape[0]] + 0.0 * self.w

    m.net = Fixed()
    with torch.no_grad():
        pred = m.predict(xi)
    assert bool(m.fused_module().last_stats["layer_rows"].any())
    assert torch.isfinite(pred.y).all()
    dense = EconomicDispatch("pglib_opf_case14_ieee", form="inequality", flows="dense")
    for problem in (ed, dense):
        assert float(problem.ineq_resid(xi, pred.y).max()) <= 0.0
        assert float((problem.eq_resid(xi, pred.y).abs() / (1.0 + ed.loads(xi).sum(dim=1, keepdim=True))).max()) <= 1e-12


def test_factor_falls_back_to_lu_where_bbus_is_not_positive_definite():
    """A negative series reactance makes Bbus indefinite: CHOLMOD's factor is refused, SuperLU's solves it."""
    import scipy.sparse as sp

    from hardlinear.problems.flows import SusceptanceFactor
    from hardlinear.problems.sparse_ptdf import susceptance_matrices

    net = load_network("pglib_opf_case14_ieee")
    b = branch_susceptance(net, "paper").copy()
    _, Bbus, _ = susceptance_matrices(net.f_bus, net.t_bus, b, len(net.bus_ids), net.ref)
    assert SusceptanceFactor(Bbus).kind == "cholmod"
    b[0] = -3.0 * b.max()
    _, bad, _ = susceptance_matrices(net.f_bus, net.t_bus, b, len(net.bus_ids), net.ref)
    assert np.linalg.eigvalsh(bad.toarray()).min() < 0
    factor = SusceptanceFactor(bad)
    assert factor.kind == "superlu"
    p = torch.randn(3, bad.shape[0], dtype=torch.float64)
    np.testing.assert_allclose(factor.solve(p).numpy(), sp.linalg.spsolve(bad.tocsc(), p.numpy().T).T, rtol=1e-10, atol=1e-10)


def test_sparse_guard_stays_at_rounding_size():
    """The factor's measured error is relative to every line's scale: a line that no injection moves (its PTDF row
    zero, as on one line of case89 and several of case1354) must not blow it up (it read 1e295 when measured per
    line)."""
    ed = EconomicDispatch("pglib_opf_case89_pegase", form="inequality", flows="sparse")
    assert (ed._flow_bound["a"] == 0).any()
    assert ed._flow_bound["solve_error"] < 1e-12
    xi, pg = _dispatch_points(ed, 4)
    guard = ed._rounding_guard(xi, pg, "sparse")
    assert float(guard.max()) < 1e-9


def test_sparse_slack_is_the_guarded_maximum():
    """thermal_slack's four-pass form (sparse flows) equals max(|pf| - smax + g, 0) where |pf| - smax > -g, else 0."""
    ed = EconomicDispatch("pglib_opf_case118_ieee", form="inequality", flows="sparse")
    xi, pg = _dispatch_points(ed, 5)
    pf = ed.line_flows(xi, pg)
    smax = torch.as_tensor(ed.network.rate_a[ed.limited])
    guard = ed._rounding_guard(xi, pg, "sparse")
    over = pf.abs() - smax
    expected = torch.where(over > -guard, torch.clamp(over + guard, min=0.0), torch.zeros_like(over))
    got = ed.thermal_slack(xi, pg, pf)
    assert int((got > 0).sum()) > 5 and int((got == 0).sum()) > 5
    assert float((got - expected).abs().max()) <= 4 * torch.finfo(torch.float64).eps * float(smax.max())


@pytest.mark.parametrize("scaled", [False, True])
def test_the_network_columns_equal_the_whole_forward_and_its_gradient(scaled):
    """run_net_columns: the generator outputs alone of a network over every variable, with and without the output
    scaling after its last layer: the same values and weight gradients as the whole forward, sliced."""
    from hardlinear.constraints.family import InputBox
    from hardlinear.layers.network import MLP, run_net, run_net_columns, scale_outputs

    box = InputBox.symmetric(6)
    net = MLP(box, 9, hidden=16, layers=2, dropout=0.2)
    if scaled:
        scale_outputs(net, -torch.arange(9.0).numpy(), torch.arange(9.0).numpy() + 1.0)
    net.eval()
    xi = box.sample(5, generator=torch.Generator().manual_seed(0)).double()
    columns = slice(0, 4)
    part = run_net_columns(net, xi, columns)
    assert part.shape == (5, 4) and torch.allclose(part, run_net(net, xi)[:, columns], rtol=0, atol=1e-6)
    grads = []
    for forward in (lambda: run_net_columns(net, xi, columns), lambda: run_net(net, xi)[:, columns]):
        net.zero_grad()
        forward().square().sum().backward()
        grads.append([p.grad.clone() for p in net.parameters()])
    for a, b in zip(*grads):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)


def test_loads_keeps_its_last_result_only_while_it_is_valid():
    """EconomicDispatch.loads reuses its last result for the same, unchanged input (one proxy call asks three or four
    times); an input changed in place, a result changed in place, an input that requires grad or a large batch is
    computed afresh, and every answer equals the formula."""
    ed = EconomicDispatch("pglib_opf_case14_ieee", form="inequality", flows="sparse")
    pd0 = torch.as_tensor(ed.network.pd[ed.load_bus])

    def formula(x: torch.Tensor) -> torch.Tensor:
        return pd0 * (ed.centre + ed.half_width * x.detach())

    xi = ed.sample(2, torch.Generator().manual_seed(0))
    first = ed.loads(xi)
    assert ed.loads(xi) is first  # the same object, unchanged: the memo
    assert ed.loads(xi.clone()) is not first and torch.equal(ed.loads(xi.clone()), first)
    xi.mul_(0.5)  # changed in place: its version moved
    assert torch.equal(ed.loads(xi), formula(xi))
    kept = ed.loads(xi)
    kept.add_(1.0)  # the result changed in place by a caller: not returned again
    assert torch.equal(ed.loads(xi), formula(xi))
    wanting = xi.clone().requires_grad_(True)
    assert ed.loads(wanting).requires_grad and ed._loads_memo is None
    big = torch.zeros(ed_module.LOADS_MEMO_MAX // ed.k + 1, ed.k, dtype=torch.float64)
    ed.loads(big)
    assert ed._loads_memo is None


def test_dispatch_kept_rows_are_exactly_the_feasible_ones():
    """The dispatch path's row test (EconomicDispatch.rows_hold): a generator over its limit, a flow past its line's limit
    and slack, a negative slack, a NaN, an unbalanced row and an infinite load are refused, the refined rows kept;
    a kept row meets every inequality row evaluated the other way (compact_slack, dense PTDF)."""
    ed = EconomicDispatch("pglib_opf_case118_ieee", form="inequality", flows="sparse")
    dense = EconomicDispatch("pglib_opf_case118_ieee", form="inequality", flows="dense")
    xi = ed.sample(8, torch.Generator().manual_seed(3))
    logits = torch.randn(8, ed.n, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    pg = ed.refined_dispatch(xi, logits, "proportional")
    excess = float(ed.network.pmax[0]) + 1e-9 - float(pg[1, 0])  # generator 0 over its limit, another lowered by as
    room = pg[1] - torch.as_tensor(ed.network.pmin)                # much: the balance still holds, the limit does not
    room[0] = -1.0
    pg[1, 0] += excess
    pg[1, int(torch.argmax(room))] -= excess
    pg[5, 3] = float("nan")
    pg[6] = pg[6] * (1 + 1e-9)  # off the balance by ~1e-9 relative
    xi[7, 0] = float("inf")
    pf = ed.line_flows(xi, pg)
    df = ed.thermal_slack(xi, pg, pf)
    smax = torch.as_tensor(ed.network.rate_a[ed.limited])
    df[4, 0] = -1e-12  # a negative slack
    over = pf.clone()
    over[2, 0] = smax[0] + df[2, 0] + 1e-9  # a line's flow past its limit and slack (the rows read these flows)
    kept = ed.rows_hold(xi, pg, df, over)
    assert kept.tolist() == [True, False, False, True, False, False, False, False]
    y = torch.cat([pg, df], dim=1)
    finite = torch.isfinite(y).all(dim=1) & torch.isfinite(xi).all(dim=1)
    feasible = finite.clone()
    feasible[finite] = dense.compact_slack(xi[finite], y[finite]).amin(dim=1) >= 0
    assert bool((kept <= feasible).all())  # a kept row meets every inequality row, evaluated the other way


def test_the_row_test_in_blocks_equals_one_pass(monkeypatch):
    """The kept-row test's line rows in blocks of rows (a batch larger than one block) give the one-pass answer."""
    ed = EconomicDispatch("pglib_opf_case118_ieee", form="inequality", flows="sparse")
    xi = ed.sample(37, torch.Generator().manual_seed(8))
    pg = ed.refined_dispatch(xi, torch.randn(37, ed.n, generator=torch.Generator().manual_seed(9), dtype=torch.float64), "proportional")
    pf = ed.line_flows(xi, pg)
    df = ed.thermal_slack(xi, pg, pf)
    df[::5, 3] = -1e-9  # some rows refused, in different blocks
    smax = torch.as_tensor(ed.network.rate_a[ed.limited])
    whole = ed_module._line_room(df, pf, smax)
    monkeypatch.setattr(ed_module, "ROW_TEST_BLOCK", 4 * df.shape[1])  # blocks of 4 rows: 10 blocks
    assert torch.equal(ed_module._line_room(df, pf, smax), whole)
    assert torch.equal(ed.rows_hold(xi, pg, df, pf), whole >= 0) and int((whole < 0).sum()) == 8
