"""The equality projection and the feasibility layer: exactness, feasibility under attack, gradients.

Safe outputs are built here, not taken from the decision-rule module: random families are constructed around
a known affine rule ``y = F x`` (``B_eq = G F``, ``B_ineq = H F + margin e_0``), and for dcopf_14 and the
portfolio a robust rule is solved with a small LP (box counterpart: ``c_i0 - sum_j |c_ij| >= t`` for the
slack coefficients ``c = B_ineq - H F``; for the portfolio, whose LHS depends on x, a constant point).
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from scipy.optimize import linprog
from torch import nn

from hardlinear.constraints.family import InputBox, InputDependentFamily, JointlyLinearFamily, lift, standard_form
from hardlinear.layers.equality import EqualityProjector
from hardlinear.layers.feasibility import FeasibilityLayer
from hardlinear.problems import build_problem

TOL = 1e-9  # float64 feasibility (relative equality residual, absolute inequality violation)
EPS32 = torch.finfo(torch.float32).eps


class AffineSafe(nn.Module):
    """``y = F x`` with ``x = (1, xi)``; ``F`` is a parameter so gradients through the safe output are tested."""

    def __init__(self, F: np.ndarray) -> None:
        super().__init__()
        self.F = nn.Parameter(torch.tensor(F, dtype=torch.float64))

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        return lift(xi) @ self.F.T


# --- constructions ---------------------------------------------------------------------------------
def random_jointly_linear(seed: int, n=12, m_eq=5, m_ineq=20, k=4, dense_h=False):
    """Random sparse G (with one dependent row), H, and the affine rule F that is feasible with margin."""
    rng = np.random.default_rng(seed)
    G = np.zeros((m_eq, n))
    for i in range(m_eq):
        G[i, rng.choice(n, 3, replace=False)] = rng.normal(size=3)
    G = np.vstack([G, G[0] + 2.0 * G[1]])  # dependent row, consistent right-hand side
    if dense_h:
        H = rng.normal(size=(m_ineq, n))
    else:
        H = np.zeros((m_ineq, n))
        for i in range(m_ineq):
            nz = rng.integers(1, 3)
            H[i, rng.choice(n, nz, replace=False)] = rng.normal(size=nz)
    F = rng.normal(size=(n, k + 1))
    B_ineq = H @ F
    B_ineq[:, 0] += rng.uniform(0.5, 1.0, m_ineq)
    box = InputBox(-np.ones(k), 2.0 * np.ones(k))
    fam = JointlyLinearFamily(box=box, G=sp.csr_matrix(G), B_eq=G @ F, H=sp.csr_matrix(H), B_ineq=B_ineq)
    return fam, F


def random_input_dependent(seed: int, n=9, m_eq=3, m_ineq=8, k=3):
    """Random G(x), H(x) around a constant safe point y0 that is feasible with margin for every x."""
    rng = np.random.default_rng(seed)
    scale = np.r_[1.0, 0.2 * np.ones(k)][:, None, None]
    G_stack = rng.normal(size=(k + 1, m_eq, n)) * scale
    H_stack = rng.normal(size=(k + 1, m_ineq, n)) * scale
    y0 = rng.normal(size=n)
    B_eq = np.einsum("jmn,n->mj", G_stack, y0)
    B_ineq = np.einsum("jmn,n->mj", H_stack, y0)
    B_ineq[:, 0] += rng.uniform(0.5, 1.0, m_ineq)
    fam = InputDependentFamily(box=InputBox.symmetric(k), G_stack=G_stack, B_eq=B_eq, H_stack=H_stack, B_ineq=B_ineq)
    F = np.zeros((n, k + 1))
    F[:, 0] = y0
    return fam, F


def robust_lp(K_eq, b_eq, K_c, b_c, m: int, k1: int, t_cap: float = 1.0):
    """``max t`` over ``v``: ``K_eq v = b_eq``; with ``c = b_c - K_c v`` as ``(m, k1)``: ``c_i0 - sum_j |c_ij| >= t``.

    That is the robust counterpart of ``c_i . x >= t`` over the box ``[-1, 1]^(k1 - 1)``.
    """
    nv, k = K_c.shape[1], k1 - 1
    na = m * k
    C = sp.csr_matrix(K_c)
    rows_j = np.array([i * k1 + j for i in range(m) for j in range(1, k1)], dtype=int)
    rows_0 = np.arange(m) * k1
    Cj, bj = C[rows_j], b_c.reshape(-1)[rows_j]
    C0, b0 = C[rows_0], b_c.reshape(-1)[rows_0]
    eye, zcol = sp.identity(na), sp.csr_matrix((na, 1))
    A_ub = sp.vstack(
        [
            sp.hstack([-Cj, -eye, zcol]),  # c_ij <= A_ij
            sp.hstack([Cj, -eye, zcol]),  # -c_ij <= A_ij
            sp.hstack([C0, sp.kron(sp.identity(m), np.ones((1, k))), np.ones((m, 1))]),  # t <= c_i0 - sum_j A_ij
        ]
    ).tocsr()
    b_ub = np.concatenate([-bj, bj, b0])
    A_eq = sp.hstack([sp.csr_matrix(K_eq), sp.csr_matrix((K_eq.shape[0], na + 1))]).tocsr()
    cost = np.zeros(nv + na + 1)
    cost[-1] = -1.0
    bounds = [(None, None)] * nv + [(0, None)] * na + [(None, t_cap)]
    res = linprog(cost, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=bounds, method="highs")
    assert res.status == 0, res.message
    return res.x[:nv], float(res.x[-1])


def robust_rule(fam) -> tuple[np.ndarray, float]:
    """A robust affine rule (jointly linear) or constant point (input-dependent LHS) on a [-1, 1] box."""
    assert np.all(fam.box.lo == -1) and np.all(fam.box.hi == 1)
    k1 = fam.k + 1
    if isinstance(fam, JointlyLinearFamily):
        eye = sp.identity(k1)
        v, t = robust_lp(sp.kron(fam.G, eye), fam.B_eq.reshape(-1), sp.kron(fam.H, eye), fam.B_ineq, fam.m_ineq, k1)
        return v.reshape(fam.n, k1), t
    K_eq = fam.G_stack.transpose(1, 0, 2).reshape(-1, fam.n)
    K_c = fam.H_stack.transpose(1, 0, 2).reshape(-1, fam.n)
    v, t = robust_lp(K_eq, fam.B_eq.reshape(-1), K_c, fam.B_ineq, fam.m_ineq, k1)
    F = np.zeros((fam.n, k1))
    F[:, 0] = v
    return F, t


def standard_rule(compact, F: np.ndarray) -> np.ndarray:
    """The rule of the standard form: ``(y, s)`` with ``s = h(x) - H(x) y(x)`` (affine when H is constant or y is)."""
    if isinstance(compact, JointlyLinearFamily):
        C = compact.B_ineq - compact.H @ F
    else:
        assert not np.any(F[:, 1:]), "input-dependent H needs a constant point to keep the slack affine"
        C = compact.B_ineq - np.einsum("jmn,n->mj", compact.H_stack, F[:, 0])
    return np.vstack([F, C])


@cache
def _case(name: str):
    if name.startswith("random_jl"):
        fam, F = random_jointly_linear(1, dense_h=name.endswith("dense"))
    elif name.startswith("random_id"):
        fam, F = random_input_dependent(2)
    elif name.startswith("dcopf_14"):
        fam = build_problem("dcopf_14", form="inequality").family
        F, t = robust_rule(fam)
        assert t > 0.1  # 0.182 at the paper's 40 % load uncertainty
    else:
        fam = build_problem("portfolio", form="inequality").family
        F, t = robust_rule(fam)
        assert t >= -1e-9  # the quality row is tight at the all-ones vertex: no rule has t* > 0 here
    if name.endswith("_std"):
        F, fam = standard_rule(fam, F), standard_form(fam)
    return fam, F


CASES = [
    "random_jl",
    "random_jl_dense",
    "random_jl_std",
    "random_id",
    "random_id_std",
    "dcopf_14",
    "dcopf_14_std",
    "portfolio",
    "portfolio_std",
]


@pytest.fixture(scope="module", params=CASES)
def case(request):
    return _case(request.param)


# --- helpers -----------------------------------------------------------------------------------------
def inputs(fam, n: int, seed: int = 0) -> torch.Tensor:
    """Random inputs and (a sample of) the box vertices, float64."""
    gen = torch.Generator().manual_seed(seed)
    return torch.cat([fam.box.sample(n, gen), fam.box.vertices(limit=256, generator=gen)])


def task_outputs(y_safe: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """The safe output plus noise of scales 1e-3 .. 1e3 (some rows stay feasible, most do not)."""
    gen = torch.Generator().manual_seed(seed)
    scale = 10.0 ** torch.randint(-3, 4, (y_safe.shape[0], 1), generator=gen).double()
    return y_safe + scale * torch.randn(y_safe.shape, generator=gen, dtype=torch.float64)


def violations(fam, xi: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row, in float64: relative equality residual (the paper's) and largest inequality violation."""
    xi, y = xi.double(), y.double()
    eq = fam.eq_resid(xi, y).norm(dim=1) / (1.0 + fam.eq_rhs(xi).norm(dim=1))
    ineq = fam.ineq_resid(xi, y).clamp(min=0.0).amax(dim=1)
    return eq, ineq


def assert_feasible(fam, xi, y, tol=TOL):
    assert torch.isfinite(y).all()
    eq, ineq = violations(fam, xi, y)
    assert eq.max() <= tol, f"equality residual {eq.max():.2e}"
    assert ineq.max() <= tol, f"inequality violation {ineq.max():.2e}"


def pinv_projection(fam, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Reference: ``y - G^+ (G y - g)`` per instance, by numpy's pseudo-inverse."""
    out, G_pinv = [], None
    for xi_i, y_i in zip(xi.numpy(), y.numpy()):
        G, g, _, _ = fam.instance(xi_i)
        G = G.toarray()
        if G_pinv is None or isinstance(fam, InputDependentFamily):
            G_pinv = np.linalg.pinv(G)
        out.append(y_i - G_pinv @ (G @ y_i - g))
    return torch.as_tensor(np.array(out))


# --- the equality projection ------------------------------------------------------------------------
def test_projection_is_exact_and_orthogonal(case):
    fam, _ = case
    proj = EqualityProjector(fam)
    xi = inputs(fam, 200)
    gen = torch.Generator().manual_seed(3)
    y = 10.0 * torch.randn(xi.shape[0], fam.n, generator=gen, dtype=torch.float64)
    z = 10.0 * torch.randn(xi.shape[0], fam.n, generator=gen, dtype=torch.float64)
    py, pz = proj(xi, y), proj(xi, z)
    scale = 1.0 + fam.eq_rhs(xi).abs().amax(dim=1) + py.abs().amax(dim=1)
    assert (fam.eq_resid(xi, py).abs().amax(dim=1) / scale).max() <= 1e-10
    assert (proj(xi, py) - py).abs().max() <= 1e-10 * (1 + py.abs().max())  # idempotent
    # Orthogonal: y - P y is normal to the affine set, i.e. to P y - P z (both in the set).
    inner = ((y - py) * (py - pz)).sum(dim=1)
    assert (inner.abs() / ((y - py).norm(dim=1) * (py - pz).norm(dim=1) + 1e-300)).max() <= 1e-9
    ref = pinv_projection(fam, xi[:20], y[:20])
    assert torch.allclose(py[:20], ref, rtol=0, atol=1e-9 * (1 + ref.abs().max()))


def test_projector_forms_agree_and_handle_dependent_rows():
    fam, _ = random_jointly_linear(5)
    null, row = EqualityProjector(fam, form="null"), EqualityProjector(fam, form="row")
    assert null.rank == row.rank == fam.m_eq - 1  # the dependent row is detected
    assert EqualityProjector(fam).form == "row"  # null space (12 - 5 = 7 columns) is wider than the rows (5)
    xi = inputs(fam, 50)
    y = torch.randn(xi.shape[0], fam.n, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(null(xi, y), row(xi, y), rtol=0, atol=1e-12)
    dcopf = build_problem("dcopf_14").family
    assert EqualityProjector(dcopf).form == "null"  # standard form: 123 - 122 = 1 null-space column


def test_projector_warns_on_inconsistent_dependent_rows():
    fam, F = random_jointly_linear(6)
    B_eq = fam.B_eq.copy()
    B_eq[-1, 0] += 1.0  # the dependent row now disagrees with the rows it depends on
    bad = JointlyLinearFamily(box=fam.box, G=fam.G, B_eq=B_eq, H=fam.H, B_ineq=fam.B_ineq)
    with pytest.warns(UserWarning, match="dependent"):
        EqualityProjector(bad)


def test_projector_keeps_float64_constants_under_dtype_casts():
    fam = build_problem("dcopf_14").family
    proj = EqualityProjector(fam).float()
    xi = inputs(fam, 100)
    y = torch.randn(xi.shape[0], fam.n, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert fam.eq_resid(xi, proj(xi, y)).abs().max() <= 1e-10
    assert proj(xi.float(), y.float()).dtype == torch.float32


def test_projector_rejects_bad_arguments():
    fam, _ = random_jointly_linear(0)
    with pytest.raises(ValueError, match="form"):
        EqualityProjector(fam, form="dense")
    with pytest.raises(ValueError, match="rank_tol"):
        EqualityProjector(fam, rank_tol=-1.0)


# --- slacks -----------------------------------------------------------------------------------------
def _select_family(coef: float, contiguous: bool):
    """``H`` with one entry ``coef`` per row, on a range of columns or on a permutation of them."""
    fam, F = random_jointly_linear(7)
    n, m = fam.n, 6
    cols = np.arange(3, 3 + m) if contiguous else np.random.default_rng(0).permutation(n)[:m]
    H = np.zeros((m, n))
    H[np.arange(m), cols] = coef
    B_ineq = H @ F
    B_ineq[:, 0] += 0.5
    return JointlyLinearFamily(box=fam.box, G=fam.G, B_eq=fam.B_eq, H=sp.csr_matrix(H), B_ineq=B_ineq), F


@pytest.mark.parametrize(
    "name, mode",
    [
        ("random_jl", "gather"),
        ("random_jl_dense", "dense"),
        ("random_jl_sparse", "sparse"),
        ("random_jl_split", "split"),
        ("random_jl_std", "select"),
        ("random_id", "batched"),
        ("random_id_std", "select"),
        ("select_indexed", "select"),
        ("select_scaled", "select"),
    ],
)
def test_slack_operator_matches_the_family(name, mode, monkeypatch):
    if name in ("random_jl_sparse", "random_jl_split"):  # long rows in an H above the dense limit (ED's PTDF rows)
        import hardlinear.constraints.family as constraints
        import hardlinear.layers.feasibility as feasibility

        monkeypatch.setattr(feasibility, "DENSE_LIMIT", 10)
        if name == "random_jl_sparse":  # no dense block allowed: the whole H as a sparse product
            monkeypatch.setattr(constraints, "SPLIT_FLOATS_PER_NONZERO", 0)
        name = "random_jl_dense"
    if name.startswith("select"):
        fam, F = _select_family(2.0 if name == "select_scaled" else -1.0, contiguous=False)
    else:
        fam, F = _case(name)
    layer = FeasibilityLayer(fam, AffineSafe(F))
    assert layer.slacks.mode == mode
    xi = inputs(fam, 100, seed=14)
    y = torch.randn(xi.shape[0], fam.n, dtype=torch.float64, generator=torch.Generator().manual_seed(14))
    h = layer.slacks.rhs(xi, y)
    assert torch.allclose(layer.slacks.slack(xi, y, h), -fam.ineq_resid(xi, y), rtol=0, atol=1e-12)
    with torch.no_grad():
        assert_feasible(fam, xi, layer(xi, task_outputs(layer.safe(xi), seed=14)))


# --- the layer: feasibility -------------------------------------------------------------------------
def test_layer_output_is_feasible_for_random_task_outputs(case):
    fam, F = case
    safe = AffineSafe(F)
    layer = FeasibilityLayer(fam, safe)
    xi = inputs(fam, 10_000, seed=1)
    with torch.no_grad():
        assert_feasible(fam, xi, safe(xi))  # the construction is right
        y = layer(xi, task_outputs(safe(xi), seed=1))
    assert_feasible(fam, xi, y)
    alpha = layer.last_stats["alpha"]
    assert alpha.shape == (xi.shape[0],) and alpha.min() >= 0 and alpha.max() <= 1
    assert (alpha > 0).any() and (alpha < 1).any()
    assert not layer.last_stats["out_of_domain"].any()
    assert not layer.last_stats["nonfinite"].any()
    assert int(layer.last_stats["alpha_hit_one"]) == int((alpha >= 1).sum())


def test_alpha_is_the_smallest_feasible_step(case):
    """Where 0 < alpha < 1 some row of the output is (numerically) at its bound: a smaller alpha violates it."""
    fam, F = case
    layer = FeasibilityLayer(fam, AffineSafe(F))
    xi = inputs(fam, 500, seed=2)
    with torch.no_grad():
        y_task = task_outputs(layer.safe(xi), seed=2)
        y = layer(xi, y_task)
    alpha = layer.last_stats["alpha"]
    inner = (alpha > 0) & (alpha < 1)
    assert inner.any()
    ineq = fam.ineq_resid(xi, y)[inner]
    # The rounding guard keeps ~1e-15 (|H| |y_TN| + |h|) of slack; allow 100 times that.
    scale = 1.0 + layer.project(xi, y_task)[inner].abs().amax(dim=1) + fam.ineq_rhs(xi[inner]).abs().amax(dim=1)
    assert ((-ineq.amax(dim=1)) / scale).max() <= 1e-13 * max(fam.n, 10)  # tight: the largest residual is ~0


def test_alpha_is_zero_when_task_output_is_feasible(case):
    fam, F = case
    if fam.n in (7, 16):
        pytest.skip("the paper's portfolio has no strictly feasible rule (t* = 0): no strictly feasible task output")
    layer = FeasibilityLayer(fam, AffineSafe(F))
    xi = inputs(fam, 500, seed=3)
    with torch.no_grad():
        y_safe = layer.safe(xi)
        y_feas = layer(xi, task_outputs(y_safe, seed=3))  # feasible, most on some bound
        # Strictly inside where the safe output is strictly inside: a convex combination of feasible points.
        y_task = 0.5 * y_feas + 0.5 * y_safe
        y = layer(xi, y_task)
        y_tn = layer.project(xi, y_task)
    assert (layer.last_stats["alpha"] == 0).all()
    assert torch.equal(y, y_tn)


@pytest.mark.parametrize("kind", ["zeros", "big", "-big", "nan", "inf", "-inf", "mixed"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_adversarial_task_outputs(case, kind, dtype):
    fam, F = case
    layer = FeasibilityLayer(fam, AffineSafe(F))
    xi = inputs(fam, 300, seed=4)
    B, n = xi.shape[0], fam.n
    gen = torch.Generator().manual_seed(4)
    values = {
        "zeros": torch.zeros(B, n),
        "big": torch.full((B, n), 1e30),
        "-big": torch.full((B, n), -1e30),
        "nan": torch.full((B, n), float("nan")),
        "inf": torch.full((B, n), float("inf")),
        "-inf": torch.full((B, n), float("-inf")),
    }
    if kind == "mixed":
        y = torch.randn(B, n, generator=gen, dtype=torch.float64)
        pick = torch.randint(0, 6, (B,), generator=gen)
        col = torch.randint(0, n, (B,), generator=gen)
        special = torch.tensor([float("nan"), float("inf"), float("-inf"), 1e30, -1e30, 3e38], dtype=torch.float64)
        y[torch.arange(B), col] = special[pick]
        y[::7] = 1e30 * torch.sign(torch.randn(y[::7].shape, generator=gen, dtype=torch.float64))  # huge, finite
        y[::11] = 0.0
    else:
        y = values[kind].double()
    y_task = y.to(dtype)
    with torch.no_grad():
        out = layer(xi.to(dtype), y_task)
    assert out.dtype == dtype
    tol = TOL if dtype == torch.float64 else 1e-12
    eq, ineq = violations(fam, xi, out)
    assert torch.isfinite(out).all()
    assert ineq.max() <= tol
    assert eq.max() <= (TOL if dtype == torch.float64 else 1e-4)
    stats = layer.last_stats
    row_nonfinite = ~torch.isfinite(y_task).all(dim=1)
    assert (stats["nonfinite"] >= row_nonfinite).all()  # every non-finite task row is caught (overflow may add)
    assert (stats["alpha"][stats["nonfinite"]] == 1).all()
    assert stats["alpha"].min() >= 0 and stats["alpha"].max() <= 1


# --- float32 ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("safe_dtype", [torch.float64, torch.float32])
def test_float32_bound(case, safe_dtype):
    """float32 in and out: inequalities hold exactly (float64 check, 1e-12); equalities to float32 rounding."""
    fam, F = case
    safe = AffineSafe(F).to(safe_dtype)
    layer = FeasibilityLayer(fam, safe)
    xi = inputs(fam, 5000, seed=5).float()
    with torch.no_grad():
        y_task = task_outputs(safe(xi.to(safe_dtype)).double(), seed=5).float()
        y = layer(xi, y_task)
    assert y.dtype == torch.float32
    xi64, y64 = xi.double(), y.double()
    ineq = fam.ineq_resid(xi64, y64)
    h = fam.ineq_rhs(xi64)
    assert (ineq.amax(dim=1) / (1.0 + h.abs().amax(dim=1) + y64.abs().amax(dim=1))).max() <= 1e-15
    # Equalities: per row, a small multiple of float32 rounding: c eps32 (||G_i||_1 ||y||_inf + |g_i|).
    bound = EQ32_FACTOR * EPS32 * (_row_norms(fam, xi64) * y64.abs().amax(dim=1, keepdim=True) + fam.eq_rhs(xi64).abs())
    assert (fam.eq_resid(xi64, y64).abs() / bound).max() <= 1.0


EQ32_FACTOR = 16.0


def _row_norms(fam, xi):
    """``||G_i(x)||_1``: (B, m_eq)."""
    if isinstance(fam, JointlyLinearFamily):
        return torch.as_tensor(np.asarray(abs(fam.G).sum(axis=1)).reshape(1, -1))
    return fam.eq_lhs(xi).abs().sum(dim=2)


def test_rounding_guard_is_what_keeps_float32_feasible():
    fam, F = _case("random_jl")
    xi = inputs(fam, 5000, seed=6).float()
    y_task = task_outputs(AffineSafe(F)(xi.double()).detach(), seed=6).float()
    worst = {}
    for guard in (0.0, 4.0):
        layer = FeasibilityLayer(fam, AffineSafe(F).float(), rounding_guard=guard)
        with torch.no_grad():
            y = layer(xi, y_task)
        worst[guard] = float(fam.ineq_resid(xi.double(), y.double()).max())
    assert worst[4.0] <= 0.0
    assert worst[0.0] > 1e-8  # without the guard float32 rounding crosses the bound (measured 3e-7)


def test_alpha_margin_leaves_room():
    fam, F = _case("random_jl_std")
    margin = 1e-3
    layer = FeasibilityLayer(fam, AffineSafe(F), alpha_margin=margin)
    xi = inputs(fam, 1000, seed=7)
    with torch.no_grad():
        y_safe = layer.safe(xi)
        y = layer(xi, task_outputs(y_safe, seed=7))
    moved = layer.last_stats["alpha"] > 0
    s_out, s_safe = -fam.ineq_resid(xi, y)[moved], -fam.ineq_resid(xi, y_safe)[moved]
    assert (s_out - margin * s_safe).min() >= -1e-12  # every row keeps margin * s_SN of slack


# --- gradients --------------------------------------------------------------------------------------
def _single_argmax_inputs(fam, F, layer, B=3, seed=8):
    """Inputs where alpha is strictly inside (0, 1) and a single row attains the max (no ties)."""
    gen = torch.Generator().manual_seed(seed)
    found_xi, found_y = [], []
    while len(found_xi) < B:
        xi = fam.box.sample(64, gen)
        with torch.no_grad():
            y_sn = layer.safe(xi)
            y_task = y_sn + 3.0 * torch.randn(y_sn.shape, generator=gen, dtype=torch.float64)
            y_tn = layer.project(xi, y_task)
            s_tn, s_sn = -fam.ineq_resid(xi, y_tn), -fam.ineq_resid(xi, y_sn)
            ratio = torch.where(s_tn < 0, -s_tn / (s_sn - s_tn), 0.0)
            top = ratio.topk(2, dim=1).values
        good = (top[:, 0] > 0.05) & (top[:, 0] < 0.95) & (top[:, 0] - top[:, 1] > 1e-3)
        found_xi += list(xi[good])
        found_y += list(y_task[good])
    return torch.stack(found_xi[:B]), torch.stack(found_y[:B])


@pytest.mark.parametrize("name", ["random_jl", "random_id_std", "dcopf_14_std"])
def test_gradcheck_argmax(name):
    """Through the projection, the arg-max row's ratio, the blend and the safe output's parameters."""
    fam, F = _case(name)
    layer = FeasibilityLayer(fam, AffineSafe(F))
    xi, y_task = _single_argmax_inputs(fam, F, layer, B=2)
    xi.requires_grad_(True)
    y_task.requires_grad_(True)
    F_param = layer.safe.F.detach().clone().requires_grad_(fam.n < 50)  # the small cases only: speed

    def fn(xi, y_task, F_param):
        return torch.func.functional_call(layer, {"safe.F": F_param}, (xi, y_task))

    assert torch.autograd.gradcheck(fn, (xi, y_task, F_param), eps=1e-6, atol=1e-6, rtol=1e-5)


def test_ste_forward_is_exact_and_backward_is_finite():
    fam, F = _case("random_jl")
    hard = FeasibilityLayer(fam, AffineSafe(F), gradient="argmax")
    ste = FeasibilityLayer(fam, AffineSafe(F), gradient="ste", ste_temperature=0.05)
    sharp = FeasibilityLayer(fam, AffineSafe(F), gradient="ste", ste_temperature=1e-6)
    xi, y_task = _single_argmax_inputs(fam, F, hard, B=4)
    grads, outs = {}, {}
    for name, layer in (("argmax", hard), ("ste", ste), ("sharp", sharp)):
        y = y_task.clone().requires_grad_(True)
        out = layer(xi, y)
        weights = torch.linspace(-1, 1, fam.n, dtype=torch.float64)
        (out * weights).sum().backward()
        grads[name], outs[name] = y.grad, out.detach()
    assert torch.equal(outs["ste"], outs["argmax"]) and torch.equal(outs["sharp"], outs["argmax"])
    assert torch.isfinite(grads["ste"]).all() and grads["ste"].abs().sum() > 0
    assert (grads["ste"] - grads["argmax"]).abs().max() > 1e-3 * grads["argmax"].abs().max()  # spread out
    assert torch.allclose(grads["sharp"], grads["argmax"], rtol=1e-6, atol=1e-9)  # T -> 0 recovers the max


@pytest.mark.parametrize("gradient", ["argmax", "ste"])
def test_no_nan_gradient_from_nonfinite_rows(gradient):
    fam, F = _case("dcopf_14_std")
    layer = FeasibilityLayer(fam, AffineSafe(F), gradient=gradient)
    xi = inputs(fam, 20, seed=9)[:20]
    y = task_outputs(layer.safe(xi).detach(), seed=9)
    y[0, 3], y[1] = float("nan"), float("inf")
    y[2] = 1e300
    y.requires_grad_(True)
    out = layer(xi, y)
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(y.grad).all()
    assert (y.grad[:2] == 0).all()
    assert layer.last_stats["nonfinite"][:2].all()


# --- shapes, dtypes, devices, policies -----------------------------------------------------------------
def test_batch_one_no_grad_and_float64_constants_survive_casts():
    fam, F = _case("portfolio_std")
    layer = FeasibilityLayer(fam, AffineSafe(F)).float().double()  # constants must still be float64-exact
    layer.safe = AffineSafe(F)  # the test's own safe module has no such protection
    xi = inputs(fam, 1, seed=10)[:1]
    y_task = task_outputs(layer.safe(xi).detach(), seed=10)
    with torch.no_grad():
        y = layer(xi, y_task)
    assert y.shape == (1, fam.n)
    assert_feasible(fam, xi, y)
    y_grad = layer(xi, y_task.requires_grad_(True))
    assert y_grad.requires_grad


def test_out_of_domain_inputs_are_flagged_and_policies_apply():
    fam, F = _case("random_id")
    xi = inputs(fam, 10, seed=11)
    xi[0, 0] = 1.5
    xi[1, 1] = float("nan")
    y_task = torch.zeros(xi.shape[0], fam.n, dtype=torch.float64)
    layer = FeasibilityLayer(fam, AffineSafe(F))
    with torch.no_grad():
        layer(xi, y_task)
    assert layer.last_stats["out_of_domain"].tolist() == [True, True] + [False] * (xi.shape[0] - 2)
    with pytest.warns(UserWarning, match="outside the box"):
        FeasibilityLayer(fam, AffineSafe(F), out_of_domain="warn")(xi, y_task)
    with pytest.raises(ValueError, match="outside the box"):
        FeasibilityLayer(fam, AffineSafe(F), out_of_domain="error")(xi, y_task)


def test_constructor_checks():
    fam, F = _case("random_jl")
    safe = AffineSafe(F)
    for kwargs, match in (
        ({"gradient": "soft"}, "gradient"),
        ({"alpha_dtype": torch.int64}, "alpha_dtype"),
        ({"ste_temperature": 0.0}, "ste_temperature"),
        ({"alpha_margin": 1.0}, "alpha_margin"),
        ({"rounding_guard": -1.0}, "rounding_guard"),
        ({"out_of_domain": "ignore"}, "out_of_domain"),
    ):
        with pytest.raises(ValueError, match=match):
            FeasibilityLayer(fam, safe, **kwargs)
    with pytest.raises(TypeError, match="safe"):
        FeasibilityLayer(fam, lambda xi: xi)
    layer = FeasibilityLayer(fam, safe)
    with pytest.raises(ValueError, match="expected"):
        layer(torch.zeros(2, fam.k), torch.zeros(2, fam.n + 1))


def test_without_equality_projection_the_task_output_must_be_on_the_equalities():
    fam, F = _case("random_jl_std")
    layer = FeasibilityLayer(fam, AffineSafe(F), project_equalities=False)
    projected = FeasibilityLayer(fam, AffineSafe(F))
    xi = inputs(fam, 200, seed=12)
    with torch.no_grad():
        y_task = projected.project(xi, task_outputs(projected.safe(xi), seed=12))
        y = layer(xi, y_task)
        assert torch.allclose(y, projected(xi, y_task), rtol=0, atol=1e-12)
    assert_feasible(fam, xi, y)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_matches_cpu():
    fam, F = _case("dcopf_14_std")
    layer = FeasibilityLayer(fam, AffineSafe(F))
    xi = inputs(fam, 1000, seed=13)
    y_task = task_outputs(layer.safe(xi).detach(), seed=13)
    with torch.no_grad():
        cpu = layer(xi, y_task)
        layer.cuda()
        gpu = layer(xi.cuda(), y_task.cuda())
        gpu32 = layer(xi.cuda().float(), y_task.cuda().float())
    assert torch.allclose(gpu.cpu(), cpu, rtol=0, atol=1e-9)
    assert_feasible(fam, xi, gpu.cpu())
    assert fam.ineq_resid(xi, gpu32.cpu().double()).max() <= 1e-12


def test_guard_gradient_off_leaves_an_output_on_a_face_free_to_move():
    """A task output exactly on a face (slack 0) while another row is violated at rounding level (what a
    refinement's output looks like): the rounding guard makes the face's row the arg max (its ratio tau / gap beats
    the violated row's). Differentiated through the guard (the default), the output's derivative along the face's
    normal is ~0 (the blend holds it there); with guard_gradient=False it is 1 - alpha, the exact-arithmetic
    layer's. A row violated outright keeps its alpha gradient either way."""
    from hardlinear.rules.decision_rule import DecisionRule

    fam = JointlyLinearFamily(
        box=InputBox.symmetric(1), G=sp.csr_matrix((0, 2)), B_eq=np.zeros((0, 2)), H=sp.eye(2, format="csr"),
        B_ineq=np.array([[1.0, 0.0], [1.0, 0.0]]),
    )
    safe = DecisionRule(np.array([[0.999, 0.0], [0.0, 0.0]]), form="inequality", t_star=1e-3)  # 1e-3 from the face
    xi = torch.zeros(2, 1, dtype=torch.float64)
    derivative = {}
    for guard_gradient in (True, False):
        layer = FeasibilityLayer(fam, safe, guard_gradient=guard_gradient)
        # row 0: y_0 on its face, y_1 past its bound by 1e-15; row 1: y_0 past its bound by 0.5
        y_task = torch.tensor([[1.0, 1.0 + 1e-15], [1.5, 0.5]], dtype=torch.float64, requires_grad=True)
        layer(xi, y_task)[:, 0].sum().backward()
        alpha = layer.last_stats["alpha"]
        assert 0 < alpha[0] < 1e-9 and 0.99 < alpha[1] < 1
        derivative[guard_gradient] = y_task.grad[:, 0]
    assert abs(derivative[True][0]) < 1e-6  # held on the face
    assert derivative[False][0] == pytest.approx(1.0, abs=1e-9)  # free to move back inside
    assert derivative[True][1] == derivative[False][1]  # a row violated outright: the same gradient


@pytest.mark.parametrize("mode", ["sparse", "split"])
def test_sparse_slack_mode_gives_the_dense_modes_outputs_and_gradients(monkeypatch, mode):
    import hardlinear.constraints.family as constraints
    import hardlinear.layers.feasibility as feasibility

    fam, F = _case("random_jl_dense")
    dense = FeasibilityLayer(fam, AffineSafe(F))
    monkeypatch.setattr(feasibility, "DENSE_LIMIT", 10)
    if mode == "sparse":
        monkeypatch.setattr(constraints, "SPLIT_FLOATS_PER_NONZERO", 0)
    sparse = FeasibilityLayer(fam, AffineSafe(F))
    assert (dense.slacks.mode, sparse.slacks.mode, sparse.slacks.compact_rhs) == ("dense", mode, True)
    xi = inputs(fam, 50, seed=3)
    base = task_outputs(dense.safe(xi), seed=3).detach()
    results = []
    for layer in (dense, sparse):
        y_task = base.clone().requires_grad_(True)
        y = layer(xi, y_task)
        y.square().sum().backward()
        results.append((y.detach(), y_task.grad))
    assert torch.allclose(results[0][0], results[1][0], rtol=0, atol=1e-12)
    assert torch.allclose(results[0][1], results[1][1], rtol=1e-9, atol=1e-9)


def _two_sided_family(seed: int = 5) -> JointlyLinearFamily:
    """ED's shape of ``H`` and ``h``: ``+-F pg - df <= smax +- D x``, ``df >= 0`` and a bound on ``pg``, so each long row
    comes twice up to sign, the slack columns are short, and a third of ``h``'s rows read no input."""
    rng = np.random.default_rng(seed)
    k, ng, ne = 6, 8, 12
    Fl, D, smax = rng.normal(size=(ne, ng)), rng.normal(size=(ne, k)), rng.uniform(1, 2, ne)
    I, Z = np.eye(ne), np.zeros((ne, ng))
    H = np.block([[Fl, -I], [-Fl, -I], [Z, -I], [np.eye(ng), np.zeros((ng, ne))]])
    B = np.vstack([np.c_[smax, D], np.c_[smax, -D], np.zeros((ne, k + 1)), np.c_[np.ones(ng), np.zeros((ng, k))]])
    G = sp.csr_matrix(np.r_[np.ones(ng), np.zeros(ne)][None])
    return JointlyLinearFamily(box=InputBox.symmetric(k), G=G, B_eq=np.zeros((1, k + 1)), H=sp.csr_matrix(H), B_ineq=B)


def test_split_mode_keeps_each_two_sided_row_once_and_gives_the_familys_slacks_and_gradients(monkeypatch):
    import hardlinear.layers.feasibility as feasibility
    from hardlinear.layers.feasibility import SlackOperator

    fam = _two_sided_family()
    exact = SlackOperator(fam)
    monkeypatch.setattr(feasibility, "DENSE_LIMIT", 10)
    split = SlackOperator(fam)
    assert (exact.mode, split.mode, split.compact_rhs) == ("dense", "split", True)
    # the 2 x 12 line rows are held once each, the bound rows too; h's input part only for the line rows, once
    assert split.consts.split_T.shape == (8, 12 + 8) and split.consts.rhs_U_T.shape == (6, 12)
    xi = inputs(fam, 40, seed=2)
    y = torch.randn(xi.shape[0], fam.n, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    for op in (exact, split):
        assert torch.allclose(op.slack(xi, y, op.rhs(xi, y)), -fam.ineq_resid(xi, y), rtol=0, atol=1e-13)
    weights = torch.randn(xi.shape[0], fam.m_ineq, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    grads = []
    for op in (exact, split):
        y_grad = y.clone().requires_grad_(True)
        (op.times(xi, y_grad) * weights).sum().backward()
        grads.append(y_grad.grad)
    assert torch.allclose(grads[0], grads[1], rtol=0, atol=1e-12)
    # float32 calls are cast from the same float64 constants
    assert torch.allclose(split.times(xi.float(), y.float()).double(), exact.times(xi, y), rtol=1e-5, atol=1e-5)
