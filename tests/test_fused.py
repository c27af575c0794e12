"""The fused inference path (hardlinear.layers.fused) against the unfused network + FeasibilityLayer.

Networks are "trained-looking": random weights, batch normalisation with non-trivial running statistics and
affine parameters, and a last layer whose output is the rule's at the centre of the box (plus a scaled random
weight away from it). Inputs run from the centre to random points of the box, so a batch holds rows the blend
leaves alone (alpha = 0) and rows it moves (0 < alpha < 1); NaN inputs and (float32) task outputs that
overflow give alpha = 1. No timing here: benchmarks/bench_methods.py times the fused path (``proposed``) beside ``proposed[unfused]``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from hardlinear.layers.fused import FusedProposed, LayerPath, NotFusable, fold_network, fuse
from hardlinear.layers.network import MLP
from hardlinear.methods.base import Context
from hardlinear.methods.proposed import Proposed
from hardlinear.problems import Portfolio, build_problem

# Weight scale of the last layer per problem: enough spread that a batch has rows with alpha = 0 and > 0.
SIGMA = {"dcopf_14": 30.0, "dcopf_118": 0.3}
B = 96


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("cache"))


def make_method(problem, cache_dir: str, dtype=torch.float64, sigma: float = 1.0, seed: int = 0) -> Proposed:
    """A set-up Proposed (fused_inference on) with a trained-looking network, in eval mode."""
    method = Proposed(out_of_domain="count", fused_inference=True)
    torch.manual_seed(seed)  # the network's initialisation
    method.setup(problem, Context(cache_dir=cache_dir, dtype=dtype, seed=seed, progress=False))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for mod in method.net.modules():
            if isinstance(mod, nn.BatchNorm1d):
                f = mod.num_features
                mod.running_mean.copy_(0.5 * torch.randn(f, generator=g))
                mod.running_var.copy_(0.5 + 1.5 * torch.rand(f, generator=g))
                mod.weight.copy_(1.0 + 0.3 * torch.randn(f, generator=g))
                mod.bias.copy_(0.3 * torch.randn(f, generator=g))
        # y_task = rule(mid) + sigma W (z(xi) - z(mid)): exact at the centre, further off further out
        method.eval()
        last = method.net.net[-1]
        mid = torch.as_tensor(problem.box.mid, dtype=torch.float64)[None]
        last.weight.mul_(sigma)
        z_mid = method.net.net[:-1](mid.to(last.weight.dtype)).double()
        last.bias.copy_(method.rule(mid)[0] - (z_mid @ last.weight.double().T)[0])
    return method.eval()


def inputs(problem, n: int = B, seed: int = 2) -> torch.Tensor:
    """``n`` float64 inputs of the box on segments from its centre (row i at fraction i / (n - 1))."""
    mid = torch.as_tensor(problem.box.mid, dtype=torch.float64)[None]
    u = problem.sample(n, generator=torch.Generator().manual_seed(seed)).double()
    return mid + torch.linspace(0.0, 1.0, n, dtype=torch.float64)[:, None] * (u - mid)


def both(method: Proposed, xi: torch.Tensor):
    """``(fused prediction, unfused prediction)`` of the same method."""
    method.fused_inference = True
    fused = method.predict(xi)
    method.fused_inference = False
    plain = method.predict(xi)
    method.fused_inference = True
    return fused, plain


def rel_diff(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per row: ``max |a - b| / (1 + max |b|)`` (NaN rows must be NaN in both: 0)."""
    same_nan = torch.isnan(a) & torch.isnan(b)
    diff = torch.where(same_nan, 0.0, (a - b).abs()).amax(dim=1)
    return diff / (1.0 + torch.nan_to_num(b, nan=0.0).abs().amax(dim=1))


def assert_feasible(problem, xi: torch.Tensor, y: torch.Tensor) -> None:
    """Float64 feasibility of every row: inequalities to 1e-9, equalities to 1e-12, relative to ``1 + |y|``."""
    scale = 1.0 + y.abs().amax(dim=1)
    ineq = problem.ineq_resid(xi, y).clamp(min=0.0).amax(dim=1) / scale
    eq = problem.eq_resid(xi, y).abs().amax(dim=1) / scale
    assert float(ineq.max()) <= 1e-9, f"inequality violation {float(ineq.max()):.2e}"
    assert float(eq.max()) <= 1e-12, f"equality residual {float(eq.max()):.2e}"


@pytest.fixture(scope="module", params=["dcopf_14", "dcopf_118"])
def case(request, cache_dir):
    problem = build_problem(request.param)
    return problem, make_method(problem, cache_dir, sigma=SIGMA[request.param])


# --- the fused path computes the layer's output ---------------------------------------------------------------
def test_fused_structure(case):
    problem, method = case
    fused = method.fused_module()
    assert isinstance(fused, FusedProposed)
    assert fused.rule_residual < 1e-12  # the solved rule is on the equalities to rounding
    assert fused.completion is not None and fused.cols < problem.n  # standard form: P x on the non-slacks only
    assert fused.d < 64 and fused.A_T.shape == (256, fused.d)  # the last layer onto the null space


@pytest.mark.parametrize("chunk_rows", [B, 16, 1])
def test_fused_matches_layer_float64(case, chunk_rows):
    """Outputs and alpha as the unfused layer's to ~1e-13 (float64 network), in one chunk, in chunks whose rows
    mostly move or mostly stay, and one row at a time."""
    problem, method = case
    xi = inputs(problem)
    fused = method.fused_module()
    fused.chunk_rows = chunk_rows
    try:
        got, want = both(method, xi)
    finally:
        fused.chunk_rows = max(64, fused.chunk_rows)
    alpha = want.extras["alpha"]
    assert int((alpha == 0).sum()) >= 10 and int(((alpha > 0) & (alpha < 1)).sum()) >= 10, "the batch must mix"
    assert float(rel_diff(got.y, want.y).max()) <= 1e-12
    assert float((got.extras["alpha"] - alpha).abs().max()) <= 1e-12
    assert torch.equal(got.extras["alpha"] == 0, alpha == 0)  # alpha = 0 rows are y_TN, bit for bit
    assert torch.equal(got.extras["out_of_domain"], want.extras["out_of_domain"])
    assert got.y.dtype == want.y.dtype == torch.float64
    assert_feasible(problem, xi, got.y)


def test_fused_single_rows(case):
    """Batch 1 (the path with one sync): a row left alone and a row that moves, each alone."""
    problem, method = case
    xi = inputs(problem)
    _, want = both(method, xi)
    alpha = want.extras["alpha"]
    for i in (int(torch.nonzero(alpha == 0)[0]), int(torch.argmax(alpha))):
        got, ref = both(method, xi[i : i + 1])
        assert float(rel_diff(got.y, ref.y).max()) <= 1e-12
        assert float((got.extras["alpha"] - ref.extras["alpha"]).abs().max()) <= 1e-12


def test_fused_nonfinite_inputs_and_stats(case):
    """NaN inputs give NaN rows with alpha = 1 and count as out of domain, as unfused; last_stats agree."""
    problem, method = case
    xi = inputs(problem, 12)
    xi[3, 0] = math.nan
    xi[7] = math.nan
    got, want = both(method, xi)
    assert torch.isnan(got.y[[3, 7]]).all() and torch.isnan(want.y[[3, 7]]).all()
    assert float(rel_diff(got.y, want.y).max()) <= 1e-12
    assert got.extras["alpha"][[3, 7]].eq(1.0).all()
    assert torch.equal(got.extras["out_of_domain"], want.extras["out_of_domain"])
    stats, ref = method.fused_module().last_stats, method.layer.last_stats
    assert set(stats) == set(ref)
    for key in ref:
        if key == "alpha":
            assert float((stats[key] - ref[key]).abs().max()) <= 1e-12
        else:
            assert torch.equal(stats[key], ref[key]), key


# --- float32 networks: task outputs that overflow ---------------------------------------------------------------
def test_fused_float32_network_and_overflow(cache_dir):
    """A float32 network: the fused path differs from the unfused one only by the float32 rounding of the task
    output it no longer forms; rows whose task output overflows float32 get the safe output (alpha = 1)."""
    problem = build_problem("dcopf_14")
    method = make_method(problem, cache_dir, dtype=torch.float32, sigma=SIGMA["dcopf_14"])
    xi = inputs(problem, 40)
    xi[[5, 17]] = 3e38  # finite in float32 (and in the rule's float64); the network's first layer overflows
    got, want = both(method, xi)
    big = torch.zeros(40, dtype=torch.bool)
    big[[5, 17]] = True
    assert got.extras["alpha"][big].eq(1.0).all() and want.extras["alpha"][big].eq(1.0).all()
    assert torch.isfinite(got.y[big]).all()
    assert float(rel_diff(got.y[big], want.y[big]).max()) <= 1e-12  # the rule (its projection) at the input
    assert float(rel_diff(got.y[~big], want.y[~big]).max()) <= 1e-5
    assert float((got.extras["alpha"] - want.extras["alpha"]).abs().max()) <= 1e-4
    assert_feasible(problem, xi[~big], got.y[~big])
    got_flags = method.fused_module().stats(("nonfinite",))["nonfinite"]
    method.fused_inference = False
    method.predict(xi)
    assert torch.equal(got_flags, big) and torch.equal(method.layer.last_stats["nonfinite"], big)


# --- lifecycle: rebuilt when weights change ---------------------------------------------------------------------
def test_fused_rebuilt_when_weights_change(cache_dir):
    problem = build_problem("dcopf_14")
    method = make_method(problem, cache_dir, sigma=SIGMA["dcopf_14"])
    xi = inputs(problem, 24)
    first = method.fused_module()
    assert method.fused_module() is first  # cached while nothing changes
    with torch.no_grad():
        method.net.net[-1].bias.add_(0.05)  # in place: the version counter moves
        method.net.net[2].running_var.mul_(1.5)
    got, want = both(method, xi)
    assert method.fused_module() is not first
    assert float(rel_diff(got.y, want.y).max()) <= 1e-12
    second = method.fused_module()
    method.train()
    assert method._fused is None  # training drops it; predict in training mode never uses it
    method.eval()
    state = {k: v.clone() if torch.is_tensor(v) else v for k, v in method.state_dict().items()}
    method.predict(xi)
    method.load_state_dict(state)
    assert method._fused is None
    method.predict(xi)
    assert method.fused_module() is not second


# --- where the structure does not allow fusion ---------------------------------------------------------------
def test_fallback_for_input_dependent_constraints(cache_dir, monkeypatch):
    import hardlinear.layers.fused as fused_module

    monkeypatch.setattr(fused_module, "_REPORTED", set())  # each reason is warned once a process
    problem = Portfolio(uncertainty=0.3)  # standard form: G depends on the input
    method = Proposed(out_of_domain="count", fused_inference=True)
    method.setup(problem, Context(cache_dir=cache_dir, dtype=torch.float64, progress=False))
    method.eval()
    with pytest.warns(UserWarning, match="fused inference unavailable .*G depends on the input"):
        fused = fuse(method)
    assert isinstance(fused, LayerPath) and not fused.fused and "G depends on the input" in fused.reason
    xi = problem.sample(8, generator=torch.Generator().manual_seed(0)).double()
    import warnings

    with warnings.catch_warnings(record=True) as caught:  # rebuilt for the new weights: not said again
        warnings.simplefilter("always")
        got, want = both(method, xi)
    assert not [w for w in caught if "fused inference unavailable" in str(w.message)]
    assert torch.equal(got.y, want.y) and torch.equal(got.extras["alpha"], want.extras["alpha"])


# Every problem where the fused path applies (issue 21): name, build options, last-layer scale. DC3's QP (small
# sizes) has free variables, so its feasible set is unbounded and the robust LP's margin is capped (t* = 1 with
# max_margin='auto', and a warning). Its nonconvex twin has the same constraints, hence the same layer. ``linear`` is a bounded QP
# from a .npz written by the test (tests/test_linear_problem.py's arrays).
DC3_SMALL = {"num_var": 20, "num_eq": 5, "num_ineq": 5, "num_examples": 30}
AGREEMENT = [
    *[(f"dcopf_{c}", {"form": f}, s) for c, s in ((14, 30.0), (30, 3.0), (57, 1.0)) for f in ("standard", "inequality")],
    ("portfolio", {"form": "inequality", "uncertainty": 0.3}, 30.0),
    ("dc3_qp", {**DC3_SMALL, "form": "inequality"}, 30.0),
    ("dc3_qp", {**DC3_SMALL, "form": "standard"}, 30.0),
    ("dc3_nonconvex", {**DC3_SMALL, "form": "inequality"}, 30.0),
    *[("linear", {"form": f}, 30.0) for f in ("inequality", "standard")],
]


@pytest.fixture(scope="module")
def linear_npz(tmp_path_factory) -> str:
    from test_linear_problem import small_arrays

    path = tmp_path_factory.mktemp("linear") / "bounded_qp.npz"
    np.savez(path, **small_arrays())
    return str(path)


def build_agreement_problem(name: str, options: dict, linear_npz: str):
    if name == "portfolio":
        return Portfolio(**options)
    if name == "linear":
        return build_problem(name, path=linear_npz, **options)
    return build_problem(name, **options)


@pytest.mark.parametrize("name, options, sigma", AGREEMENT, ids=[f"{a}-{b['form']}" for a, b, _ in AGREEMENT])
def test_fused_agrees_with_the_layer_wherever_it_applies(cache_dir, linear_npz, name, options, sigma):
    """Fused and unfused outputs and alpha agree to 1e-12 (float64) on every problem where fusion applies:
    DC-OPF in both forms (the inequality form's projection is the dense one), the portfolio's inequality
    form (the projection's row form and an input-dependent H(x)), DC3's QP in both forms and its nonconvex
    twin, and an LP/QP read from a .npz (problem=linear) in both forms."""
    problem = build_agreement_problem(name, options, linear_npz)
    method = make_method(problem, cache_dir, sigma=sigma)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no fallback warning: it fuses
        fused = method.fused_module()
    assert isinstance(fused, FusedProposed)
    if name == "portfolio":
        assert method.layer.projector.form == "row" and fused.direct_rule
    xi = inputs(problem)
    got, want = both(method, xi)
    assert float(rel_diff(got.y, want.y).max()) <= 1e-12
    assert float((got.extras["alpha"] - want.extras["alpha"]).abs().max()) <= 1e-12
    alpha = want.extras["alpha"]
    assert int((alpha > 0).sum()) >= 5, "some rows must move"
    assert int((alpha == 0).sum()) >= 5, "some rows must stay"
    assert_feasible(problem, xi, got.y)


@pytest.mark.parametrize("form", ["standard", "inequality"])
def test_a_null_space_wider_than_the_last_hidden_layer_fuses(cache_dir, form):
    """``u = N' y_task`` is a ``d x h`` layer for any ``d``: at case6470_rte ``d = 760`` against 256 hidden units
    (once refused). Here ``d = 18`` (case118) against 8."""
    problem = build_problem("dcopf_118", form=form)
    method = Proposed(out_of_domain="count", fused_inference=True)
    torch.manual_seed(0)
    network = {"hidden": 8, "layers": 2, "batch_norm": True}
    method.setup(problem, Context(cache_dir=cache_dir, dtype=torch.float64, progress=False, network=network))
    method.eval()
    with torch.no_grad():  # y_task = rule(mid) + 3 W (z(xi) - z(mid)), as make_method
        last, mid = method.net.net[-1], torch.as_tensor(problem.box.mid, dtype=torch.float64)[None]
        last.weight.mul_(3.0)
        last.bias.copy_(method.rule(mid)[0] - (method.net.net[:-1](mid) @ last.weight.T)[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        fused = method.fused_module()
    assert isinstance(fused, FusedProposed) and fused.d == 18 > last.weight.shape[1]
    xi = inputs(problem)
    got, want = both(method, xi)
    assert float(rel_diff(got.y, want.y).max()) <= 1e-12
    assert float((got.extras["alpha"] - want.extras["alpha"]).abs().max()) <= 1e-12
    assert int((want.extras["alpha"] > 0).sum()) >= 5 and int((want.extras["alpha"] == 0).sum()) >= 5
    assert_feasible(problem, xi, got.y)


def test_inequality_form_uses_the_dense_path(cache_dir):
    problem = build_problem("dcopf_14", form="inequality")
    method = make_method(problem, cache_dir, sigma=SIGMA["dcopf_14"])
    fused = method.fused_module()
    assert isinstance(fused, FusedProposed) and fused.completion is None
    xi = inputs(problem)
    got, want = both(method, xi)
    assert float(rel_diff(got.y, want.y).max()) <= 1e-12
    assert float((got.extras["alpha"] - want.extras["alpha"]).abs().max()) <= 1e-12
    assert_feasible(problem, xi, got.y)


def test_fold_network_is_the_network_and_refuses_unknown_layers():
    problem = build_problem("dcopf_14")
    net = MLP(problem.box, 7).double()
    with torch.no_grad():
        for mod in net.modules():
            if isinstance(mod, nn.BatchNorm1d):
                mod.running_mean.uniform_(-1.0, 1.0)
                mod.running_var.uniform_(0.5, 2.0)
    net.eval()
    hidden, (W, b) = fold_network(net)
    xi = problem.sample(5, generator=torch.Generator().manual_seed(0)).double()
    z = xi
    for Wh, bh in hidden:
        z = torch.relu(z @ Wh.T + bh)
    np.testing.assert_allclose((z @ W.T + b).numpy(), net(xi).detach().numpy(), rtol=1e-12, atol=1e-12)
    with pytest.raises(NotFusable):
        fold_network(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)))
    net.train()
    with pytest.raises(NotFusable):
        fold_network(net)  # batch statistics are not an affine map


def test_fused_inference_option_is_validated_from_the_signature():
    """``fused_inference`` needs no entry in hardlinear.harness.schemas: it is read from Proposed's signature."""
    from pathlib import Path

    from hydra import compose, initialize_config_dir

    from hardlinear.harness.schemas import ConfigError, validate_config

    conf = Path(__file__).resolve().parents[1] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        base = ["problem=dcopf_14", "method=proposed"]
        validate_config(compose(config_name="config", overrides=[*base, "method.fused_inference=true"]))
        with pytest.raises(ConfigError, match="fused_inference must be a bool"):
            validate_config(compose(config_name="config", overrides=[*base, "method.fused_inference=abc"]))


def test_fused_domain_policy_flags_outside_and_nan_inputs(case):
    """out_of_domain='warn': the fused path's batch check (a min and a max over the batch) warns for inputs
    outside the box and NaN inputs, and flags the same rows as the layer; inside the box it stays silent."""
    problem, method = case
    xi = inputs(problem, 10)
    method.layer.out_of_domain = "warn"
    try:
        fused = method.fused_module()
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            fused(xi)
        bad = xi.clone()
        bad[2, 0] = float(problem.box.hi[0]) + 1.0
        bad[6, 1] = math.nan
        with pytest.warns(UserWarning, match="2 of 10 inputs lie outside the box"):
            fused(bad)
        flags = fused.stats(("out_of_domain",))["out_of_domain"]
        assert torch.equal(flags, method.layer.domain_flags(bad)) and flags.sum() == 2
    finally:
        method.layer.out_of_domain = "count"


# --- the batch-1 path (row_mode) ------------------------------------------------------------------------------
def _row_outputs(problem, method, mode: str, xi: torch.Tensor):
    fused = FusedProposed(problem.family, method.net, method.layer, method.layer_dtype, row_mode=mode)
    ys, alphas = [], []
    with torch.no_grad():
        for i in range(xi.shape[0]):
            ys.append(fused(xi[i : i + 1]))
            alphas.append(fused.last_stats["alpha"])
    return fused, torch.cat(ys), torch.cat(alphas)


@pytest.mark.parametrize("mode", ["eager", "script", pytest.param("compile", marks=pytest.mark.slow)])
def test_batch1_path_matches_the_layer(case, mode):
    """Each batch-1 mode, row by row, gives the unfused layer's outputs and alpha (~1e-13), keeps alpha = 0 rows
    bit for bit, and is feasible in float64; the general path (``off``) is not taken where the mode applies."""
    problem, method = case
    xi = inputs(problem)
    fused, y, alpha = _row_outputs(problem, method, mode, xi)
    assert fused._row is not None and fused.row_mode == mode
    _, want = both(method, xi)
    assert int((want.extras["alpha"] == 0).sum()) >= 10 and int((want.extras["alpha"] > 0).sum()) >= 10
    assert float(rel_diff(y, want.y).max()) <= 1e-12
    assert float((alpha - want.extras["alpha"]).abs().max()) <= 1e-12
    assert torch.equal(alpha == 0, want.extras["alpha"] == 0)
    assert_feasible(problem, xi, y)
    _, y_off, _ = _row_outputs(problem, method, "off", xi)
    assert float(rel_diff(y, y_off).max()) <= 1e-13


def test_batch1_path_hands_nonfinite_rows_to_the_general_path(case):
    """A NaN input gives the unfused layer's NaN row (alpha = 1) through the batch-1 path too."""
    problem, method = case
    xi = inputs(problem, 2).clone()
    xi[1, 0] = math.nan
    fused = FusedProposed(problem.family, method.net, method.layer, method.layer_dtype, row_mode="eager")
    with torch.no_grad():
        y = fused(xi[1:2])
    assert bool(torch.isnan(y).all()) and float(fused.last_stats["alpha"][0]) == 1.0


def test_batch1_mode_is_validated(case):
    problem, method = case
    with pytest.raises(ValueError, match="row_mode must be one of"):
        FusedProposed(problem.family, method.net, method.layer, method.layer_dtype, row_mode="jit")


# --- the block path (batch_mode) ------------------------------------------------------------------------------
def _block_outputs(problem, method, mode: str, xi: torch.Tensor, chunk_rows: int):
    """``(module, y, alpha)`` of one call on a block of rows, in chunks of ``chunk_rows``."""
    fused = FusedProposed(problem.family, method.net, method.layer, method.layer_dtype, batch_mode=mode)
    fused.chunk_rows = chunk_rows
    with torch.no_grad():
        y = fused(xi)
    return fused, y, fused.last_stats["alpha"]


def assert_same_as_eager_blocks(problem, method, xi: torch.Tensor, y: torch.Tensor, alpha: torch.Tensor) -> None:
    """``(y, alpha)`` of a block mode against the default block path (``off``): outputs to 1e-12 relative and
    alpha to 1e-12, alpha = 0 on the same rows and those rows bit for bit; the slacks of every row >= 0 exactly
    (the layer's own float64 evaluation), equalities as :func:`assert_feasible`."""
    _, y_off, alpha_off = _block_outputs(problem, method, "off", xi, 40)
    assert float(rel_diff(y, y_off).max()) <= 1e-12
    assert float((alpha - alpha_off).abs().max()) <= 1e-12
    stay = alpha_off == 0
    assert torch.equal(alpha == 0, stay) and torch.equal(y[stay], y_off[stay])
    layer = method.layer
    slacks = layer.slacks.slack(xi, y, layer.slacks.rhs(xi, y))
    assert float(slacks.amin()) >= 0.0, f"worst slack {float(slacks.amin()):.3e}"
    assert float(problem.ineq_resid(xi, y).amax()) <= 0.0
    assert_feasible(problem, xi, y)


@pytest.mark.parametrize("mode", ["eager", pytest.param("compile", marks=pytest.mark.slow)])
def test_block_path_matches_the_default_path(case, mode):
    """The block functions (:func:`_chunk_task`, :func:`_chunk_blend`), as written and compiled by inductor, in
    chunks of 40 rows and a last chunk of 16: the default path's outputs and alpha, rows that stay bit for bit,
    every slack >= 0 exactly."""
    problem, method = case
    xi = inputs(problem)
    fused, y, alpha = _block_outputs(problem, method, mode, xi, 40)
    from hardlinear.layers import fused as fused_mod

    assert fused.batch_mode == mode
    assert (fused_mod._BATCH_CACHE[mode][0] is fused_mod._chunk_task) == (mode == "eager")  # compile: not a fallback
    assert int((alpha == 0).sum()) >= 10 and int(((alpha > 0) & (alpha < 1)).sum()) >= 10, "the batch must mix"
    assert_same_as_eager_blocks(problem, method, xi, y, alpha)


def test_block_path_hands_nonfinite_rows_to_the_general_blend(case):
    """A chunk with a NaN input: NaN rows with alpha = 1, the other rows as the default path."""
    problem, method = case
    xi = inputs(problem, 12)
    xi[3, 0] = math.nan
    _, y, alpha = _block_outputs(problem, method, "eager", xi, 6)
    _, y_off, alpha_off = _block_outputs(problem, method, "off", xi, 6)
    assert torch.isnan(y[3]).all() and float(alpha[3]) == 1.0
    assert float(rel_diff(y, y_off).max()) <= 1e-12 and float((alpha - alpha_off).abs().max()) <= 1e-12


def test_block_path_falls_back_to_eager_when_compilation_fails(case, monkeypatch):
    """A compiler that fails at the first call (here a torch.compile backend that raises, as inductor does
    without a C++ compiler) is reported once and replaced by the eager functions: same outputs as ``eager``."""
    from hardlinear.layers import fused as fused_mod

    def broken(gm, example_inputs):
        raise RuntimeError("no C++ compiler (test)")

    monkeypatch.setitem(
        fused_mod._BATCH_CACHE,
        "compile",
        (torch.compile(fused_mod._chunk_task, backend=broken), torch.compile(fused_mod._chunk_blend, backend=broken)),
    )
    problem, method = case
    xi = inputs(problem, 24)
    with pytest.warns(UserWarning, match="batch_mode='compile' failed.*using eager"):
        fused, y, alpha = _block_outputs(problem, method, "compile", xi, 12)
    assert fused_mod._BATCH_CACHE["compile"] is fused_mod._BATCH_CACHE["eager"]
    _, y_eager, alpha_eager = _block_outputs(problem, method, "eager", xi, 12)
    assert torch.equal(y, y_eager) and torch.equal(alpha, alpha_eager)
    torch._dynamo.reset()  # the failed frames' cache entries: none for the next test


def test_block_path_falls_back_to_eager_when_torch_compile_is_unavailable(case, monkeypatch):
    """``torch.compile`` itself refusing (e.g. a Python that dynamo does not support) is reported, and the block
    path runs the eager functions."""
    from hardlinear.layers import fused as fused_mod

    def unavailable(*args, **kwargs):
        raise RuntimeError("torch.compile is not supported here (test)")

    saved = fused_mod._BATCH_CACHE.pop("compile", None)  # so that the mode is set up again, with no compiler
    monkeypatch.setattr(torch, "compile", unavailable)
    problem, method = case
    xi = inputs(problem, 24)
    try:
        with pytest.warns(UserWarning, match="batch_mode='compile' unavailable.*using eager"):
            fused, y, alpha = _block_outputs(problem, method, "compile", xi, 12)
    finally:  # the next tests compile for real
        fused_mod._BATCH_CACHE.pop("compile", None)
        if saved is not None:
            fused_mod._BATCH_CACHE["compile"] = saved
    _, y_eager, alpha_eager = _block_outputs(problem, method, "eager", xi, 12)
    assert torch.equal(y, y_eager) and torch.equal(alpha, alpha_eager)


def test_batch_mode_is_validated(case):
    problem, method = case
    with pytest.raises(ValueError, match="batch_mode must be one of"):
        FusedProposed(problem.family, method.net, method.layer, method.layer_dtype, batch_mode="jit")
