"""The feasibility guarantee, audited: the paper's problems with their real decision rules, random problems
(hypothesis), inputs outside the box through ``Proposed``, and adversarial task outputs.

Tolerances (see docs/reliability.md; the layer's module docstring states what they come from):

* float64 layer: relative equality residual (metrics.py: ``||G y - g||_2 / (1 + ||g||_2)``) <= 1e-9, largest
  inequality violation <= 1e-9 absolute and relative (metrics.py's ``||(H y - h)^+||_2 / (1 + ||h||_2)``);
* float32 layer (the safe network cast to float32, as ``Proposed(layer_dtype="float32")`` runs it): the same
  inequality bound (the docstring: inequalities hold in float32 as in float64, up to the rounding of their
  float64 evaluation); equalities per row ``|G_i y - g_i| <= 16 eps32 (||G_i||_1 ||y||_inf + |g_i|)`` (the
  docstring's ``c' = 16``), and at most 1e-5 relative (docstring: "~1e-6"; measured <= 6e-7);
* the portfolio's rule has ``t* = -6.9e-9``: zero up to the solver's accuracy, the rule itself misses its
  binding row by up to ``|t*|`` at the vertex where that row binds (standard form: row weight 1, so the
  slack is >= t*), and the layer outputs the rule there. Its inequality tolerance is ``1e-9 + |t*|`` in float64
  and, in float32, ``1e-9 + |t*| + 8 eps32``: the float32 rule's own rounding of its O(1) slacks (measured
  3.7e-8), which no margin absorbs when ``t* = 0``.

Every output must be finite.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from hardlinear.constraints.family import InputBox, JointlyLinearFamily
from hardlinear.evaluation.audit import (
    AuditConfig,
    AuditRow,
    ascent_outputs,
    audit,
    float32_layer,
    layer_ascent_outputs,
    residuals,
    violation_figures,
)
from hardlinear.evaluation.metrics import instance_metrics
from hardlinear.evaluation.protocol import EvalConfig, evaluate_method
from hardlinear.layers import FeasibilityLayer
from hardlinear.methods.base import Context
from hardlinear.methods.proposed import Proposed
from hardlinear.problems import build_problem
from hardlinear.problems.base import Objective, Problem
from hardlinear.problems.datasets import Dataset, build_dataset
from hardlinear.rules import solve_decision_rule
from hardlinear.solvers import SolverError

TOL64 = 1e-9  # float64: relative equality residual, absolute and relative inequality violation
EQ32_FACTOR = 16.0  # float32: the docstring's c' in |G_i y - g_i| <= c' eps32 (||G_i||_1 ||y||_inf + |g_i|)
EQ32_REL = 1e-5  # float32: relative equality residual (docstring "~1e-6"; measured <= 6e-7)
EPS32 = torch.finfo(torch.float32).eps
PROJECT_TOL = 1e-7  # out_of_domain="project": Clarabel's QP accuracy (absolute residuals)

PAPER_PROBLEMS = ["dcopf_14", "dcopf_30", "dcopf_57", "dcopf_118", "dcopf_200", "portfolio"]
LARGE = {"dcopf_118", "dcopf_200"}
SMALL_NET = {"hidden": 32, "layers": 2, "batch_norm": True}


@pytest.fixture(scope="module")
def rule_cache(tmp_path_factory):
    """Decision rules and datasets of this module: solved once, in a directory of its own."""
    return tmp_path_factory.mktemp("guarantee-cache")


def paper_problem(name: str):
    return build_problem(name)  # the standard form, the paper's uncertainty levels


def real_rule(problem, cache_dir):
    """The rule the method uses: ``solve_decision_rule`` with the cache; the portfolio's zero-margin rule is
    accepted as ``Proposed(require_positive_margin=False)`` accepts it."""
    if problem.name == "portfolio":
        with pytest.warns(UserWarning, match="no strict margin"):
            return solve_decision_rule(problem, cache_dir=cache_dir, require_positive_margin=False)
    return solve_decision_rule(problem, cache_dir=cache_dir)


def tolerances(problem, t_star: float) -> dict[str, float]:
    """Largest allowed absolute inequality violation per dtype (module docstring)."""
    rule_miss = max(0.0, -t_star)  # standard form: every slack of the rule is >= t*
    return {"float64": TOL64 + rule_miss, "float32": TOL64 + rule_miss + (8 * EPS32 if rule_miss > 0 else 0.0)}


def assert_guarantee(problem, rows: list[AuditRow], t_star: float) -> None:
    """Every audited group within the module's tolerances; the message names the group."""
    tol = tolerances(problem, t_star)
    m = problem.family.m_ineq
    for r in rows:
        where = f"{problem.name} {r.input_set}/{r.task}/{r.dtype}"
        assert r.inputs > 0, where
        assert r.nonfinite_outputs == 0, f"{where}: {r.nonfinite_outputs} non-finite outputs"
        assert r.out_of_domain == 0, f"{where}: inputs of the audit lie in the box"
        assert r.ineq_abs_worst <= tol[r.dtype], f"{where}: inequality violation {r.ineq_abs_worst:.3e}"
        # relative: 1e-9, plus the rule's own miss on up to m rows (h = 0 in the standard form: ||miss||_2)
        rel_tol = TOL64 + math.sqrt(m) * (tol[r.dtype] - TOL64)
        assert r.ineq_rel_worst <= rel_tol, f"{where}: relative inequality violation {r.ineq_rel_worst:.3e}"
        if r.dtype == "float64":
            assert r.eq_rel_worst <= TOL64, f"{where}: equality residual {r.eq_rel_worst:.3e}"
        else:
            assert r.eq_bound_ratio <= EQ32_FACTOR, f"{where}: equality ratio {r.eq_bound_ratio:.2f} > 16"
            assert r.eq_rel_worst <= EQ32_REL, f"{where}: equality residual {r.eq_rel_worst:.3e}"
        if r.task in ("nan", "inf", "huge"):
            # non-finite task rows get alpha = 1 (the safe output); 1e30 rounds alpha to 1 in both dtypes
            assert r.alpha_one_frac == 1.0, f"{where}: alpha_one_frac {r.alpha_one_frac}"


def by(rows: list[AuditRow], **match) -> list[AuditRow]:
    return [r for r in rows if all(getattr(r, k) == v for k, v in match.items())]


# --- (a) the paper's problems with their real rules ---------------------------------------------------------
@pytest.mark.parametrize("name", PAPER_PROBLEMS)
def test_paper_problem_guarantee_holds_under_audit(name, rule_cache):
    problem = paper_problem(name)
    rule = real_rule(problem, rule_cache)
    if name == "portfolio":
        assert -1e-7 < rule.t_star <= 0  # zero up to the solver's accuracy: the tolerance adds |t*|
    else:
        assert rule.t_star > 0
    if name in LARGE:  # a few hundred inputs: sampled vertices, a random subset of rows attacked
        cfg = AuditConfig(uniform=48, vertex_limit=48, attack_rows=48, attack_steps=3, ascent_steps=4, network=SMALL_NET)
    else:
        cfg = AuditConfig(uniform=128, vertex_limit=128, attack_steps=4, ascent_steps=6, network=SMALL_NET)
    layer = FeasibilityLayer(problem.family, rule)
    rows = audit(problem, layer, cfg)
    assert len(rows) == 3 * 8 * 2
    assert_guarantee(problem, rows, rule.t_star)

    vertices = by(rows, input_set="vertices", task="zeros", dtype="float64")[0]
    assert vertices.inputs == (2**problem.k if problem.k <= cfg.all_vertices_k else cfg.vertex_limit)
    attacks = by(rows, input_set="attack", task="zeros", dtype="float64")[0]
    assert attacks.inputs == (problem.family.m_ineq if cfg.attack_rows is None else cfg.attack_rows)
    # The layer had work to do: the untrained network violates, and the ascent reaches alpha -> 1 regimes.
    assert by(rows, input_set="uniform", task="mlp", dtype="float64")[0].alpha_moved_frac > 0.5
    assert by(rows, input_set="uniform", task="ascent", dtype="float64")[0].task_viol_worst > 1e3
    if isinstance(problem.family, JointlyLinearFamily) and cfg.attack_rows is None:
        # For a constant task output the projected output is affine in xi: the attack's vertex is each row's
        # exact maximiser, so it violates at least as much as any sampled input does.
        sampled = max(by(rows, input_set=s, task="zeros", dtype="float64")[0].task_viol_worst for s in ("uniform", "vertices"))
        assert attacks.task_viol_worst >= sampled * (1 - 1e-12)


def test_audit_catches_a_layer_without_its_rounding_guard(rule_cache):
    """The audit can fail: without the rounding guard, the ascent outputs (~1e13 off) cross bounds by ~1e-3
    even in float64 (the error of alpha times the slack range), where the guarded layer stays at 0."""
    problem = paper_problem("dcopf_14")
    rule = real_rule(problem, rule_cache)
    cfg = AuditConfig(uniform=64, vertex_limit=64, attack_steps=2, ascent_steps=8, network=SMALL_NET)
    for guard, expect_violation in ((0.0, True), (4.0, False)):
        rows = by(audit(problem, FeasibilityLayer(problem.family, rule, rounding_guard=guard), cfg), task="ascent")
        worst = max(r.ineq_abs_worst for r in rows if r.dtype == "float64")
        assert (worst > 1e-6) if expect_violation else (worst == 0.0), (guard, worst)


def test_audit_figures_are_the_metrics_definitions(rule_cache):
    """The audit's relative residuals are metrics.py's, to rounding (one definition of "relative")."""
    for name in ("dcopf_14", "portfolio"):
        problem = paper_problem(name)
        gen = torch.Generator().manual_seed(0)
        xi = problem.sample(50, gen)
        y = torch.randn(50, problem.n, generator=gen, dtype=torch.float64)
        fig = violation_figures(problem.family, xi, y, float(torch.finfo(torch.float64).eps))
        ref = instance_metrics(problem, xi, y, torch.ones(50, dtype=torch.float64))
        np.testing.assert_allclose(fig["eq_rel"].numpy(), ref["eq_viol"], rtol=1e-12)
        np.testing.assert_allclose(fig["ineq_rel"].numpy(), ref["ineq_viol"], rtol=1e-12)
        assert torch.equal(fig["ineq_abs"], problem.ineq_resid(xi, y).clamp(min=0).amax(dim=1))
        eq, _, ineq, _ = residuals(problem.family, xi, y)
        assert torch.allclose(eq, problem.eq_resid(xi, y), rtol=0, atol=1e-12)


# --- (b) random problems -----------------------------------------------------------------------------------
@st.composite
def random_problems(draw):
    """A random jointly linear problem built around a known affine rule ``F`` with per-row margins, on a
    random (asymmetric, possibly degenerate) box; returns ``(problem, known margin t of F)``."""
    seed = draw(st.integers(0, 2**32 - 1))
    n = draw(st.integers(2, 9))
    m_eq = draw(st.integers(1, n - 1))  # >= 1: a family without equality rows cannot be built (see report)
    m_rand = draw(st.integers(0, 8))
    k = draw(st.integers(1, 6))
    form = draw(st.sampled_from(["standard", "inequality"]))
    dependent = draw(st.booleans()) and m_eq >= 2
    flat = draw(st.booleans())  # one input coordinate with a zero-width range
    rng = np.random.default_rng(seed)

    def sparse_rows(m: int) -> np.ndarray:
        M = np.zeros((m, n))
        for i in range(m):
            nz = rng.integers(1, min(3, n) + 1)
            M[i, rng.choice(n, nz, replace=False)] = rng.normal(size=nz) * 10.0 ** rng.uniform(-1, 1)
        return M

    G = sparse_rows(m_eq)
    if dependent:
        G = np.vstack([G, G[0] - 0.5 * G[1]])  # a dependent row with a consistent right-hand side
    # +-I rows bound every variable around the rule (the margin LP is bounded); random rows couple them
    H = np.vstack([sparse_rows(m_rand), np.eye(n), -np.eye(n)])
    F = rng.normal(size=(n, k + 1))
    margin = rng.uniform(0.05, 1.0, H.shape[0])
    B_ineq = H @ F
    B_ineq[:, 0] += margin
    lo = rng.uniform(-2.0, 1.0, k)
    hi = lo + rng.uniform(0.1, 2.0, k)
    if flat:
        hi[0] = lo[0]
    family = JointlyLinearFamily(
        box=InputBox(lo, hi), G=sp.csr_matrix(G.reshape(-1, n)), B_eq=G.reshape(-1, n) @ F, H=sp.csr_matrix(H), B_ineq=B_ineq
    )
    weights = np.ones(H.shape[0]) if form == "standard" else np.linalg.norm(H, axis=1)
    problem = Problem(family, Objective(c=rng.normal(size=n)), "lp", form, f"random-{seed}")
    return problem, float(np.min(margin / weights))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_problems())
def test_random_problem_guarantee(case):
    problem, known = case
    rule = solve_decision_rule(problem, cache_dir=None)
    assert rule.t_star >= known - 1e-6 * (1 + known)  # the LP's optimum is at least the known rule's margin
    cfg = AuditConfig(uniform=32, vertex_limit=32, attack_steps=2, ascent_steps=3, network={"hidden": 16, "layers": 1, "batch_norm": False})
    rows = audit(problem, FeasibilityLayer(problem.family, rule), cfg)
    for r in rows:  # relative inequality figures: these problems' right-hand sides are not zero
        assert r.nonfinite_outputs == 0 and r.out_of_domain == 0
        assert r.ineq_abs_worst <= TOL64 and r.ineq_rel_worst <= TOL64, r
        if r.dtype == "float64":
            assert r.eq_rel_worst <= TOL64, r
        else:
            assert r.eq_bound_ratio <= EQ32_FACTOR and r.eq_rel_worst <= EQ32_REL, r


# --- (c) inputs outside the box through Proposed ------------------------------------------------------------
class HostileNet(nn.Module):
    """A task network turned adversarial: its output times 1e30 where ``xi_0 > 0`` (``everywhere=False``) or on
    every input. Such outputs get ``alpha = 1``: the layer's output is the rule's."""

    def __init__(self, net: nn.Module, everywhere: bool = False) -> None:
        super().__init__()
        self.net, self.everywhere = net, everywhere

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        out = self.net(xi)
        return out * (1e30 if self.everywhere else torch.where(xi[:, :1] > 0, 1e30, 1.0).to(out.dtype))


def make_proposed(problem, cache, policy: str, hostile: bool = False) -> Proposed:
    """``Proposed`` set up on ``problem`` with the rule from ``cache``; the same network for the same call."""
    method = Proposed(out_of_domain=policy, pretrain=False)
    torch.manual_seed(0)
    method.setup(problem, Context(cache_dir=str(cache), progress=False, network=SMALL_NET))
    if hostile:
        method.net = HostileNet(method.net, everywhere=True)
    return method.eval()


@pytest.fixture(scope="module")
def outside(rule_cache):
    """dcopf_14, inputs inside the box, and outside it where C(x) is not empty (some of them where the rule
    itself is infeasible, so the layer's output is too), plus one outside input where C(x) is empty."""
    problem = paper_problem("dcopf_14")
    rule = real_rule(problem, rule_cache)
    gen = torch.Generator().manual_seed(5)
    inside = problem.sample(6, gen)
    scaled = [s * problem.box.vertices(8, gen) for s in (2.0, 3.0)]
    candidates = torch.cat([s * torch.ones(1, problem.k) for s in (1.1, 1.2, 1.3, -1.3)] + scaled)
    status = problem.solve(candidates, allow_failures=True).status
    feasible = candidates[[s == "optimal" for s in status]]
    rule_miss = problem.ineq_resid(feasible, rule(feasible)).amax(dim=1)
    assert len(feasible) >= 4 and (rule_miss > 1e-3).sum() >= 2  # the projection has something to fix
    xi = torch.cat([inside[:3], feasible, inside[3:]])
    is_out = torch.zeros(len(xi), dtype=torch.bool)
    is_out[3 : 3 + len(feasible)] = True
    empty = 5.0 * torch.ones(1, problem.k)
    assert problem.solve(empty, allow_failures=True).status != ["optimal"]
    return problem, xi, is_out, empty


def test_out_of_domain_count_warn_error(outside, rule_cache):
    problem, xi, is_out, _ = outside
    count = make_proposed(problem, rule_cache, "count", hostile=True)
    pred = count.predict(xi)
    assert torch.equal(pred.extras["out_of_domain"], is_out)
    assert torch.equal(count.layer.last_stats["safe_infeasible"][~is_out], torch.zeros(int((~is_out).sum()), dtype=torch.bool))
    y_out = pred.y[is_out]
    assert problem.ineq_resid(xi[is_out], y_out).max() > 1e-3  # outside the box nothing is guaranteed
    assert problem.ineq_resid(xi[~is_out], pred.y[~is_out]).max() <= TOL64

    warn = make_proposed(problem, rule_cache, "warn", hostile=True)
    with pytest.warns(UserWarning, match=f"{int(is_out.sum())} of {len(xi)} inputs lie outside the box"):
        y_warn = warn.predict(xi).y
    assert torch.equal(y_warn, pred.y)  # a warning changes nothing
    error = make_proposed(problem, rule_cache, "error", hostile=True)
    with pytest.raises(ValueError, match=r"outside the box.*use 'warn' or 'count'"):
        error.predict(xi)
    error.predict(xi[~is_out])  # inside the box: no error


def test_out_of_domain_project_is_feasible_and_leaves_inside_rows(outside, rule_cache):
    problem, xi, is_out, empty = outside
    count = make_proposed(problem, rule_cache, "count", hostile=True)  # outputs = the rule's (alpha = 1)
    project = make_proposed(problem, rule_cache, "project", hostile=True)
    y_count, y = count.predict(xi).y, project.predict(xi).y
    assert torch.equal(y[~is_out], y_count[~is_out])  # rows inside the box: untouched, bit for bit
    eq = problem.eq_resid(xi[is_out], y[is_out]).abs().max()
    ineq = problem.ineq_resid(xi[is_out], y[is_out]).max()
    assert eq <= PROJECT_TOL and ineq <= PROJECT_TOL, (eq, ineq)
    # the nearest point: no farther from the layer's output than the reference optimum is
    ref = torch.as_tensor(problem.solve(xi[is_out]).y)
    assert ((y - y_count)[is_out].norm(dim=1) <= (ref - y_count[is_out]).norm(dim=1) + 1e-6).all()

    # the metrics count them
    sol = problem.solve(xi)
    test = Dataset(xi=xi, y=torch.as_tensor(sol.y), objective=torch.as_tensor(sol.objective), solve_time_s=sol.time_s, solver="highs")
    ctx = Context(cache_dir=str(rule_cache), progress=False, network=SMALL_NET)
    metrics = evaluate_method(project, problem, test, ctx, EvalConfig(warmup=0, time_instances=1, throughput_batch=0))
    assert metrics["test/out_of_domain"] == float(is_out.sum())
    assert metrics["test/ineq_viol_worst"] <= PROJECT_TOL and metrics["test/eq_viol_worst"] <= PROJECT_TOL
    assert evaluate_method(count, problem, test, ctx, EvalConfig(warmup=0, time_instances=1, throughput_batch=0))["test/ineq_viol_worst"] > 1e-4

    with pytest.raises(SolverError, match="input 0 lies outside the box"):
        project.predict(empty)  # C(x) is empty there: no nearest point, said loudly


# --- (d) adversarial task outputs ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["dcopf_14", "portfolio"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_gradient_ascent_outputs_stay_feasible_and_alpha_one_is_counted(name, dtype, rule_cache):
    problem = paper_problem(name)
    rule = real_rule(problem, rule_cache)
    layer = FeasibilityLayer(problem.family, rule)
    gen = torch.Generator().manual_seed(7)
    xi = torch.cat([problem.sample(64, gen), problem.box.vertices(64, gen)])
    with torch.no_grad():
        start = rule(xi) + torch.randn(xi.shape[0], problem.n, generator=gen, dtype=torch.float64)
    y_task = torch.cat([ascent_outputs(problem, layer, xi, start, 8), layer_ascent_outputs(problem, layer, xi, start, 4)])
    y_task[::9] = 1e30  # alpha = 1 for sure on these rows
    xi_all = torch.cat([xi.repeat(8, 1), xi.repeat(4, 1)])
    work = layer if dtype == torch.float64 else float32_layer(layer)  # the rule in float32 too
    with torch.no_grad():
        y = work(xi_all.to(dtype), y_task.to(dtype))
    stats = work.last_stats
    assert torch.isfinite(y).all()
    fig = violation_figures(problem.family, xi_all.to(dtype), y, float(torch.finfo(dtype).eps))
    tol = tolerances(problem, rule.t_star)[str(dtype).removeprefix("torch.")]
    assert fig["ineq_abs"].max() <= tol
    assert fig["eq_rel"].max() <= (TOL64 if dtype == torch.float64 else EQ32_REL)
    # the ascent reached violations 1e4 times the output's size: the blend ran from alpha ~ 0 to alpha ~ 1
    task_viol = residuals(problem.family, xi_all, work.project(xi_all.to(dtype), y_task.to(dtype)))[2].amax(dim=1)
    assert task_viol.max() > 1e3 and (stats["alpha"] > 0.999).any() and ((stats["alpha"] > 0) & (stats["alpha"] < 0.5)).any()
    # alpha_hit_one counts alpha >= 1, and those rows are exactly the safe output (lerp is exact at 1)
    one = stats["alpha"] >= 1
    assert int(stats["alpha_hit_one"]) == int(one.sum()) >= len(range(0, len(y_task), 9))
    assert torch.equal(y[one], work.safe_output(xi_all.to(dtype))[one].to(dtype))


def test_hostile_network_through_proposed_counts_alpha_one(rule_cache):
    problem = paper_problem("dcopf_14")
    method = make_proposed(problem, rule_cache, "count")
    opt = torch.optim.Adam(method.net.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(3)
    method.net.train()
    for _ in range(30):  # gradient ascent on the task output's violation (the layer has to rescue it)
        xi = problem.sample(64, gen)
        y_tn = method.layer.project(xi, method.net(xi.float()).double())
        loss = -problem.ineq_resid(xi, y_tn).clamp(min=0).sum(dim=1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    method.net = HostileNet(method.net).eval()
    test = build_dataset(problem, "test", 40, seed=11, cache_dir=rule_cache, progress=False)
    ctx = Context(cache_dir=str(rule_cache), progress=False, network=SMALL_NET)
    metrics = evaluate_method(method, problem, test, ctx, EvalConfig(warmup=0, time_instances=1, throughput_batch=0))
    assert metrics["test/ineq_viol_worst"] <= TOL64 and metrics["test/eq_viol_worst"] <= TOL64
    assert math.isfinite(metrics["test/gap_mean"])
    pred = method.predict(test.xi)
    alpha = pred.extras["alpha"]
    hostile = test.xi[:, 0] > 0
    assert (alpha[hostile] == 1).all() and (alpha[~hostile] > 0).all()  # every trained output needed the rule
    assert metrics["test/alpha_one_frac"] == float((alpha >= 1).double().mean()) >= float(hostile.double().mean()) > 0
    assert int(method.layer.last_stats["alpha_hit_one"]) == int((alpha >= 1).sum())
    assert torch.equal(pred.y[alpha >= 1], method.rule(test.xi)[alpha >= 1])
