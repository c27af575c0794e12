"""The paper's baselines: solver and projection exactness, APM/EAPM stopping, DC3's layers, and a contract run
of every baseline on dcopf_14 and the portfolio with untrained networks."""

from __future__ import annotations

import importlib.util

import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp
import torch

from hardlinear.constraints.family import InputBox, JointlyLinearFamily
from hardlinear.layers.peers.dc3 import EqualityCompletion, GradientCorrection, row_max
from hardlinear.methods.alm import ALM
from hardlinear.methods.apm import APM
from hardlinear.methods.base import Context
from hardlinear.methods.dc3 import DC3
from hardlinear.methods.eapm import EAPM
from hardlinear.methods.optimizer import Optimizer
from hardlinear.methods.penalty import Penalty
from hardlinear.methods.post_projection import PostProjection, project
from hardlinear.problems import build_problem
from hardlinear.solvers import SolverError, SolverUnavailable

torch.set_num_threads(1)

SMALL_NET = {"hidden": 32, "layers": 2, "batch_norm": True}
HAS_GUROBI = importlib.util.find_spec("gurobipy") is not None


@pytest.fixture(scope="module")
def problems():
    return {
        "dcopf_14": build_problem("dcopf_14"),
        "dcopf_14_qp": build_problem("dcopf_14", objective="qp"),
        "dcopf_14_ineq": build_problem("dcopf_14", form="inequality"),
        "portfolio": build_problem("portfolio"),
        "portfolio_ineq": build_problem("portfolio", form="inequality"),
        "dcopf_30": build_problem("dcopf_30"),
    }


def ctx(seed: int = 0) -> Context:
    return Context(seed=seed, progress=False, network=SMALL_NET, dtype=torch.float32)


def inputs(problem, n: int, seed: int = 0) -> torch.Tensor:
    return problem.sample(n, generator=torch.Generator().manual_seed(seed))


def max_ineq(problem, xi, y) -> torch.Tensor:
    return row_max(problem.ineq_resid(xi, y).clamp(min=0.0))


# --- optimizer --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "solver"),
    [("dcopf_14", "highs"), ("dcopf_14_qp", "clarabel"), ("dcopf_14_qp", "osqp"), ("portfolio", "highs")],
)
def test_optimizer_matches_reference_objective(problems, key, solver):
    problem = problems[key]
    xi = inputs(problem, 6, seed=1)
    ref = problem.solve(xi)
    method = Optimizer(solver=solver)
    method.setup(problem, ctx())
    method.eval()
    pred = method.predict(xi.float())  # warm-started from an untrained network where the backend takes a start
    f = problem.objective(xi, pred.y).numpy()
    np.testing.assert_allclose(f, ref.objective, rtol=1e-6, atol=1e-9)
    assert pred.y.shape == (6, problem.n)
    assert np.all(pred.extras["time_s"] > 0) and pred.extras["status"] == ["optimal"] * 6
    assert method.describe() == {"variant": solver}
    assert method.trainable == (solver != "clarabel")  # nothing to warm-start in Clarabel


def test_optimizer_non_optimal_is_loud(problems):
    problem = problems["dcopf_14"]
    xi = inputs(problem, 2).float()
    method = Optimizer(solver="osqp", warm_start=False, max_iter=2, polishing=False)  # cannot converge in 2 steps
    method.setup(problem, ctx())
    with pytest.raises(SolverError, match="not optimal"):
        method.predict(xi)
    method.on_failure = "nan"
    pred = method.predict(xi)
    assert pred.extras["failures"] == 2 and torch.isnan(pred.y).all()


# --- post-projection -------------------------------------------------------------------------------------


def cvxpy_projection(family, xi: np.ndarray, y_hat: np.ndarray) -> np.ndarray:
    G, g, H, h = family.instance(xi)
    y = cp.Variable(family.n)
    cp.Problem(cp.Minimize(cp.sum_squares(y - y_hat)), [G @ y == g, H @ y <= h]).solve(solver=cp.CLARABEL)
    return y.value


@pytest.mark.parametrize("key", ["dcopf_14", "portfolio", "portfolio_ineq"])
@pytest.mark.parametrize("solver", ["clarabel", "osqp"])
def test_projection_is_the_nearest_feasible_point(problems, key, solver):
    problem = problems[key]
    rng = np.random.default_rng(3)
    xi = inputs(problem, 3, seed=2)
    ref = problem.solve(xi).y
    for i in range(3):
        y_hat = ref[i] + rng.normal(scale=0.3, size=problem.n)  # infeasible, near the optimum
        res = project(problem.family, xi[i].numpy(), y_hat, solver)
        y_cvx = cvxpy_projection(problem.family, xi[i].numpy(), y_hat)
        d, d_cvx = np.linalg.norm(res.y - y_hat), np.linalg.norm(y_cvx - y_hat)
        assert d == pytest.approx(d_cvx, rel=1e-5)
        np.testing.assert_allclose(res.y, y_cvx, atol=1e-3 * (1 + np.abs(y_cvx).max()))
        # the projection of a feasible point is itself
        same = project(problem.family, xi[i].numpy(), ref[i], solver).y
        np.testing.assert_allclose(same, ref[i], atol=1e-4)


def test_post_projection_prediction_is_feasible(problems):
    problem = problems["dcopf_14"]
    method = PostProjection(solver="clarabel")
    method.setup(problem, ctx())
    method.eval()
    xi = inputs(problem, 4)
    pred = method.predict(xi.float())
    assert pred.y.shape == (4, problem.n) and pred.y.dtype == torch.float64
    assert problem.eq_resid(xi, pred.y).abs().max() < 1e-6
    assert max_ineq(problem, xi, pred.y).max() < 1e-6
    assert method.describe() == {"variant": "clarabel"} and method.supervised


# --- APM / EAPM ------------------------------------------------------------------------------------------


def apm_method(cls, problem, **kwargs):
    method = cls(**kwargs)
    method.setup(problem, ctx())
    method.eval()
    return method


@pytest.mark.parametrize("cls", [APM, EAPM])
def test_apm_on_the_inequality_form_is_not_applicable_and_names_the_fix(problems, cls):
    """The slacks' orthant needs the standard form: refused at set-up, before any factorisation, with the setting
    that fixes it (the harness's config check says the same before any work: tests/test_bad_configs.py)."""
    from hardlinear.errors import NotApplicable

    method = cls()
    with pytest.raises(NotApplicable, match=r"set problem.form=standard"):
        method.setup(problems["dcopf_14_ineq"], ctx())
    assert not hasattr(method, "correction")


@pytest.mark.parametrize("cls", [APM, EAPM])
@pytest.mark.parametrize("key", ["dcopf_14", "portfolio"])
def test_apm_converges_on_feasible_instances(problems, cls, key):
    problem = problems[key]
    method = apm_method(cls, problem, max_iter=2000)
    xi = inputs(problem, 8, seed=5)
    ref = torch.as_tensor(problem.solve(xi).y)
    start = ref + 0.2 * torch.randn(ref.shape, generator=torch.Generator().manual_seed(0), dtype=ref.dtype)
    y, iters = method.correction(xi, start)
    assert torch.all(iters < 2000)
    assert max_ineq(problem, xi, y).max() <= method.tol
    assert problem.eq_resid(xi, y).abs().max() < 1e-9
    assert iters.max() > 0  # the start was infeasible: some correction happened


def test_eapm_needs_fewer_iterations_than_apm(problems):
    problem = problems["dcopf_14"]
    xi = inputs(problem, 16, seed=6)
    ref = torch.as_tensor(problem.solve(xi).y)
    start = ref + 0.2 * torch.randn(ref.shape, generator=torch.Generator().manual_seed(1), dtype=ref.dtype)
    it_apm = apm_method(APM, problem, max_iter=5000).correction(xi, start)[1]
    it_eapm = apm_method(EAPM, problem, max_iter=5000).correction(xi, start)[1]
    assert it_eapm.double().mean() < it_apm.double().mean()


@pytest.mark.parametrize("cls", [APM, EAPM])
def test_apm_stops_at_the_iteration_limit(problems, cls):
    problem = problems["portfolio"]  # APM needs ~100 iterations here from this start, EAPM ~5 on average
    method = apm_method(cls, problem, max_iter=3)
    xi = inputs(problem, 16)
    ref = torch.as_tensor(problem.solve(xi).y)
    start = ref + torch.randn(ref.shape, generator=torch.Generator().manual_seed(2), dtype=ref.dtype)
    y, iters = method.correction(xi, start)
    unconverged = max_ineq(problem, xi, y) > method.tol
    assert unconverged.any()
    assert torch.all(iters[unconverged] == 3) and torch.all(iters <= 3)


@pytest.mark.parametrize("extrapolate", [False, True])
@pytest.mark.parametrize("key", ["dcopf_14", "dcopf_30", "portfolio"])
def test_apm_null_space_coordinates_give_the_generic_iterates(problems, key, extrapolate):
    """The fast path (iterating on null-space coordinates) and the reference path (n-vectors, P_V each step)
    are the same algorithm: same iteration counts, same outputs to rounding."""
    from hardlinear.layers.equality import EqualityProjector
    from hardlinear.layers.peers.apm import AlternatingProjection

    problem = problems[key]
    projector = EqualityProjector(problem.family)
    xi = inputs(problem, 16, seed=7)
    assert projector.affine_parametrisation(xi, torch.zeros(1, dtype=torch.float64)) is not None
    ref = torch.as_tensor(problem.solve(xi).y)
    start = ref + 0.3 * torch.randn(ref.shape, generator=torch.Generator().manual_seed(3), dtype=ref.dtype)
    layers = [
        AlternatingProjection(projector, problem.n_orig, max_iter=400, extrapolate=extrapolate, coordinates=c)
        for c in (True, False)
    ]
    (y_fast, it_fast), (y_ref, it_ref) = (layer(xi, start) for layer in layers)
    assert it_ref.max() > (5 if not extrapolate and key != "portfolio" else 0)  # a real correction
    assert torch.equal(it_fast, it_ref)
    scale = 1.0 + y_ref.abs().max()
    assert (y_fast - y_ref).abs().max() <= 1e-9 * scale
    assert problem.eq_resid(xi, y_fast).abs().max() < 1e-9


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("extrapolate", [False, True])
@pytest.mark.parametrize("key", ["dcopf_14", "portfolio"])
def test_unrolled_correction_gradient_is_non_expansive(problems, key, extrapolate, dtype):
    """The backward pass through the unrolled iterations is a product of projections' Jacobians (EAPM's
    extrapolated part is a constant there), so it never amplifies: ||dL/dy_net|| <= ||dL/dy_out||. The exact
    EAPM Jacobian multiplies by up to L = 1e4 per step and overflowed float32 in a paper run."""
    from hardlinear.layers.equality import EqualityProjector
    from hardlinear.layers.peers.apm import AlternatingProjection

    problem = problems[key]
    layer = AlternatingProjection(EqualityProjector(problem.family), problem.n_orig, max_iter=300, extrapolate=extrapolate)
    xi = inputs(problem, 32, seed=9).to(dtype)
    y_net = (5.0 * torch.randn(32, problem.n, generator=torch.Generator().manual_seed(4), dtype=torch.float64)).to(dtype)
    y_net.requires_grad_(True)
    y, iters = layer(xi, y_net)
    assert iters.max() > 1
    weights = torch.randn(problem.n, generator=torch.Generator().manual_seed(5), dtype=torch.float64).to(dtype)
    (y @ weights).sum().backward()
    grad = y_net.grad
    assert torch.isfinite(grad).all()
    assert float(grad.norm(dim=1).max()) <= float(weights.norm()) * (1 + 1e-4)


@pytest.mark.parametrize("cls", [APM, EAPM])
def test_apm_trains_through_its_correction(problems, cls):
    """train_iter > 0: the loss sees the corrected output (feasible to tol) and its gradient reaches the
    network; train_iter = 0: the raw network output, as the soft-penalty baseline."""
    problem = problems["dcopf_14"]
    xi = inputs(problem, 8, seed=8)
    through = apm_method(cls, problem, train_iter=300)
    through.train()
    y = through(xi)
    assert max_ineq(problem, xi, y).max() <= through.tol
    loss = through.loss(xi, y)
    loss.backward()
    grads = [p.grad for p in through.net.parameters() if p.grad is not None]
    assert grads and any(float(g.abs().sum()) > 0 for g in grads)
    raw = apm_method(cls, problem, train_iter=0, penalty=5000.0)
    raw.train()
    assert max_ineq(problem, xi, raw(xi)).max() > through.tol  # an untrained network is infeasible


@pytest.mark.parametrize("cls", [APM, EAPM])
def test_apm_supervised_fit_regresses_the_raw_network(problems, cls):
    """fit=supervised: the MSE is taken on the uncorrected network (as post-projection's), APM corrects at
    inference, and the rows say so in their variant."""
    problem = problems["dcopf_14"]
    method = apm_method(cls, problem, fit="supervised")
    assert method.supervised and method.describe()["variant"] == "supervised"
    xi = inputs(problem, 4, seed=3)
    raw = method.regress(xi).to(torch.float64)
    assert raw.shape == (4, problem.n)
    corrected = method.predict(xi).y
    assert max_ineq(problem, xi, corrected).max() <= method.tol < max_ineq(problem, xi, raw).max()
    with pytest.raises(ValueError, match="fit must be one of"):
        cls(fit="mse")


@pytest.mark.parametrize("extrapolate", [False, True])
def test_apm_on_an_infeasible_instance_runs_to_the_limit(extrapolate):
    """V = {s_1 + s_2 = -1} misses C = {s >= 0}: no iterate can be feasible."""
    from hardlinear.layers.equality import EqualityProjector
    from hardlinear.layers.peers.apm import AlternatingProjection

    family = JointlyLinearFamily(
        box=InputBox.symmetric(1),
        G=sp.csr_matrix([[1.0, 1.0]]),
        B_eq=np.array([[-1.0, 0.0]]),
        H=sp.csr_matrix(-np.eye(2)),
        B_ineq=np.zeros((2, 2)),
    )
    layer = AlternatingProjection(EqualityProjector(family), slack_start=0, max_iter=50, extrapolate=extrapolate)
    xi = torch.zeros(3, 1, dtype=torch.float64)
    y, iters = layer(xi, torch.tensor([[2.0, -3.0], [0.5, 0.5], [-1.0, 0.0]], dtype=torch.float64))
    assert torch.all(iters == 50)
    assert torch.all(layer.violation(y) > 0.4)  # the best any point of V does is s = (-1/2, -1/2)
    assert torch.isfinite(y).all()


# --- DC3 -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["dcopf_14", "dcopf_14_ineq", "portfolio", "portfolio_ineq"])
def test_dc3_completion_satisfies_equalities(problems, key):
    problem = problems[key]
    completion = EqualityCompletion(problem.family, generator=torch.Generator().manual_seed(0))
    assert completion.n_partial == problem.n - torch.linalg.matrix_rank(
        torch.as_tensor(problem.family.instance(problem.box.mid)[0].toarray())
    )
    xi = inputs(problem, 64, seed=7)
    z = 3.0 * torch.randn(64, completion.n_partial, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    y = completion(xi, z)
    assert problem.eq_resid(xi, y).abs().max() < 1e-9
    assert torch.equal(y[:, completion.partial_idx], z)
    # the completion reproduces a feasible solution from its partial variables
    ref = torch.as_tensor(problem.solve(xi[:4]).y)
    torch.testing.assert_close(completion(xi[:4], ref[:, completion.partial_idx]), ref, atol=1e-9, rtol=0)


@pytest.mark.parametrize("key", ["dcopf_14", "portfolio"])
def test_dc3_correction_gradient_is_the_autograd_gradient(problems, key):
    problem = problems[key]
    completion = EqualityCompletion(problem.family)
    corr = GradientCorrection(completion)
    xi = inputs(problem, 5, seed=8)
    z = torch.randn(5, completion.n_partial, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    z.requires_grad_(True)
    y = completion(xi, z)
    pos = problem.ineq_resid(xi, y).clamp(min=0.0)
    (grad,) = torch.autograd.grad((pos**2).sum(), z)
    HP = corr.ineq_jacobian(xi, torch.float64)
    analytic = 2.0 * (torch.einsum("bm,bmp->bp", pos, HP) if HP.dim() == 3 else pos @ HP)
    torch.testing.assert_close(analytic, grad, atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize(("key", "lr"), [("dcopf_14", 1e-4), ("portfolio", 1e-2)])
def test_dc3_correction_reduces_violation(problems, key, lr):
    problem = problems[key]
    completion = EqualityCompletion(problem.family)
    corr = GradientCorrection(completion, lr=lr, momentum=0.5, max_iter=50)
    xi = inputs(problem, 16, seed=9)
    ref = torch.as_tensor(problem.solve(xi).y)[:, completion.partial_idx]
    z = ref + 0.1 * torch.randn(ref.shape, generator=torch.Generator().manual_seed(5), dtype=ref.dtype)
    before = max_ineq(problem, xi, completion(xi, z))
    y, steps = corr(xi, z)
    after = max_ineq(problem, xi, y)
    assert before.max() > corr.tol
    assert after.sum() < before.sum()
    assert problem.eq_resid(xi, y).abs().max() < 1e-9
    assert torch.all(steps[before <= corr.tol] == 0) and torch.all(steps <= 50)
    assert torch.all((after <= corr.tol) | (steps == 50))  # each instance stopped for a reason


# --- ALM -------------------------------------------------------------------------------------------------


def test_alm_multipliers_follow_the_mean_residual(problems):
    problem = problems["portfolio"]
    method = ALM(penalty=2.0, dual_step=3.0)
    method.setup(problem, ctx())
    method.train()
    xi = inputs(problem, 32).float()
    y = method(xi)
    method.loss(xi, y).backward()
    eq = problem.eq_resid(xi, y).detach().mean(dim=0)
    ineq = problem.ineq_resid(xi, y).detach().clamp(min=0.0).mean(dim=0)
    with torch.no_grad():
        method.eval()
        method.loss(xi, method(xi))  # validation-style call: must not count
    logged = method.after_epoch(0)
    torch.testing.assert_close(method.lam, 3.0 * eq)
    torch.testing.assert_close(method.mu, 3.0 * ineq)
    assert torch.all(method.mu >= 0) and logged["alm_mu_norm"] == pytest.approx(float(method.mu.norm()))
    method.after_epoch(1)  # no batches: multipliers unchanged
    torch.testing.assert_close(method.mu, 3.0 * ineq)
    assert ALM(penalty=7.0).dual_step == 7.0  # default: the method of multipliers' step


# --- every baseline runs: forward / loss / predict with untrained networks ---------------------------------

LEARNED = {
    "penalty": lambda: Penalty(),
    "alm": lambda: ALM(),
    "dc3": lambda: DC3(max_iter=20),
    "apm": lambda: APM(max_iter=20),
    "eapm": lambda: EAPM(max_iter=20),
    "post_projection": lambda: PostProjection(),
    "optimizer": lambda: Optimizer(),
}
# Largest absolute equality residual of the prediction: float64 layers vs solver tolerances.
EQUALITY_EXACT = {"dc3": 1e-9, "apm": 1e-9, "eapm": 1e-9, "post_projection": 1e-7, "optimizer": 1e-7}


@pytest.mark.parametrize("name", sorted(LEARNED))
@pytest.mark.parametrize("key", ["dcopf_14", "portfolio"])
def test_every_baseline_runs(problems, name, key):
    problem = problems[key]
    method = LEARNED[name]()
    assert method.name == name
    method.setup(problem, ctx())
    xi = inputs(problem, 8, seed=11).float()
    if method.trainable:
        method.train()
        y = method(xi)
        width = problem.n if not method.supervised else method.solution_target(torch.zeros(8, problem.n)).shape[1]
        assert y.shape == (8, width) and torch.isfinite(y).all()
        if method.supervised:
            loss = torch.nn.functional.mse_loss(method.regress(xi), method.solution_target(torch.zeros(8, problem.n)))
        else:
            loss = method.loss(xi, y)
        assert torch.isfinite(loss) and loss.dim() == 0
        loss.backward()
        grads = [p.grad for p in method.parameters() if p.requires_grad]
        assert grads and all(g is not None and torch.isfinite(g).all() for g in grads)
    method.eval()
    xi64 = xi.double()  # float64 inputs are accepted (cast for the network), so layers see the exact input
    pred = method.predict(xi64)
    assert pred.y.shape == (8, problem.n) and torch.isfinite(pred.y).all()
    assert pred.iterations.shape == (8,) and pred.iterations.dtype == torch.long
    assert torch.all(pred.iterations >= 0)
    if name in EQUALITY_EXACT:
        assert problem.eq_resid(xi64, pred.y.double()).abs().max() < EQUALITY_EXACT[name]


def test_penalty_training_reduces_violation(problems):
    """400 Adam steps on the soft loss cut the violation of an untrained network by 4x (portfolio)."""
    problem = problems["portfolio"]
    method = Penalty(penalty=50.0)
    method.setup(problem, ctx(seed=1))
    gen = torch.Generator().manual_seed(12)
    val = inputs(problem, 128, seed=13).float()

    def violation() -> float:
        method.eval()
        with torch.no_grad():
            y = method.predict(val).y
            eq, ineq = problem.eq_resid(val, y), problem.ineq_resid(val, y).clamp(min=0.0)
        return float((eq.norm(dim=1) + ineq.norm(dim=1)).mean())

    before = violation()
    opt = torch.optim.Adam(method.parameters(), lr=3e-3)
    method.train()
    for _ in range(400):
        xi = problem.sample(64, generator=gen).float()
        loss = method.loss(xi, method(xi))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert violation() < 0.25 * before


# --- Gurobi (size-limited pip licence) ------------------------------------------------------------------


@pytest.mark.skipif(not HAS_GUROBI, reason="gurobipy is not installed (pip install 'hardlinear[gurobi]')")
def test_gurobi_small_models_solve_and_large_ones_are_refused(problems):
    problem = problems["portfolio"]
    xi = inputs(problem, 3, seed=14)
    method = Optimizer(solver="gurobi")
    method.setup(problem, ctx())
    method.eval()
    np.testing.assert_allclose(
        problem.objective(xi, method.predict(xi.float()).y).numpy(), problem.solve(xi).objective, rtol=1e-6
    )
    res = project(problem.family, xi[0].numpy(), np.zeros(problem.n), "gurobi")
    assert res.optimal
    big = build_problem("dcopf_118", objective="qp")
    with pytest.raises(SolverUnavailable, match="gurobi"):
        PostProjection(solver="gurobi").setup(big, ctx())
    with pytest.raises(SolverUnavailable, match="gurobi"):
        Optimizer(solver="gurobi").setup(big, ctx())  # refused at set-up, before any training


def test_post_projection_targets_the_decisions(problems):
    """targets=decisions: the network predicts the generator outputs only, the projection keeps them as close as
    feasibility allows and completes angles, flows and slacks; a feasible prediction comes back unchanged."""
    problem = problems["dcopf_14"]
    method = PostProjection(targets="decisions")
    method.setup(problem, ctx())
    pg = problem.decision_indices()
    assert method.net(inputs(problem, 2).float()).shape == (2, len(pg)) and len(pg) < problem.n_orig
    xi = inputs(problem, 4, seed=12)
    ref = torch.as_tensor(problem.solve(xi).y)
    assert torch.equal(method.solution_target(ref), ref[:, torch.as_tensor(pg)])
    for i in range(4):  # the optimum's own dispatch is feasible: projected onto itself, the rest completed
        res = method.projection(xi[i].numpy(), ref[i, pg].numpy())
        assert np.abs(res.y[pg] - ref[i, pg].numpy()).max() < 1e-4  # an interior point: distance ~ sqrt(its tolerance)
        assert np.abs(problem.eq_resid(xi[i : i + 1], torch.as_tensor(res.y)[None])).max() < 1e-7
    with pytest.raises(ValueError, match="targets must be one of"):
        PostProjection(targets="everything")
