"""Economic dispatch as PGLearn poses it (hardlinear.problems.ed): sizes, the load recipe, the PTDF flows, the
reference solves and the thermal slack that keeps every line row satisfiable."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hardlinear.layers.peers.e2elr import proportional_response
from hardlinear.problems import build_problem
from hardlinear.problems.ed import LOAD_HIGH, LOAD_LOW, LOAD_NOISE

CASE = "pglib_opf_case14_ieee"


@pytest.fixture(scope="module")
def ed():
    return build_problem("ed", case=CASE)


def test_sizes_and_names(ed):
    net = ed.network
    ng, ne = len(net.gen_bus), int((net.rate_a > 0).sum())
    assert ed.name == "ed_case14_ieee" and ed.k == int((net.pd != 0).sum()) == 11
    assert ed.n_orig == ng + ne
    assert ed.m_eq == 1 + int((net.pmin == net.pmax).sum())  # one balance row, the fixed generators
    assert ed.m_ineq == 2 * int((net.pmin != net.pmax).sum()) + 3 * ne  # generator pairs, line pairs, df >= 0


def test_loads_follow_pglearns_recipe(ed):
    xi = ed.sample(2000, torch.Generator().manual_seed(0))
    assert xi.abs().max() <= 1.0
    factor = ed.loads(xi) / torch.as_tensor(ed.network.pd[ed.load_bus])
    # pd_i = a e_i pd0_i: within the recipe's range, and the spread of one draw is the noise's, not the box's
    assert factor.min() >= LOAD_LOW * (1 - LOAD_NOISE) - 1e-12 and factor.max() <= LOAD_HIGH * (1 + LOAD_NOISE) + 1e-12
    spread = factor.max(dim=1).values / factor.min(dim=1).values
    assert spread.max() <= (1 + LOAD_NOISE) / (1 - LOAD_NOISE) + 1e-12
    assert factor.mean().item() == pytest.approx(0.5 * (LOAD_LOW + LOAD_HIGH), abs=0.01)
    again = ed.sample(2000, torch.Generator().manual_seed(0))
    assert torch.equal(xi, again)  # seeded


def test_ptdf_flows_conserve_power(ed):
    net = ed.network
    rng = np.random.default_rng(0)
    p = rng.normal(size=len(net.bus_ids))
    p -= p.mean()  # a balanced injection
    pf = ed.ptdf @ p
    into = np.zeros(len(net.bus_ids))
    np.add.at(into, net.f_bus, -pf)
    np.add.at(into, net.t_bus, pf)
    assert np.allclose(-into, p, atol=1e-10)  # what leaves each bus is what it injects
    assert np.all(ed.ptdf[:, net.ref] == 0)


def test_reference_solves_are_feasible_with_the_smallest_slack(ed):
    xi = ed.sample(4, torch.Generator().manual_seed(1))
    sol = ed.solve(xi)
    y = torch.as_tensor(sol.y)
    assert ed.eq_resid(xi, y).abs().max() <= 1e-8 and ed.ineq_resid(xi, y).max() <= 1e-8
    s = ed.variable_slices()
    assert torch.allclose(y[:, s["df"]], ed.thermal_slack(xi, y[:, s["pg"]]), atol=1e-8)
    assert torch.allclose(ed.objective(xi, y), torch.as_tensor(sol.objective), rtol=1e-9)


@pytest.mark.parametrize("case, large", [(CASE, False), ("pglib_opf_case118_ieee", False), ("pglib_opf_case118_ieee", True)])
def test_line_rows_hold_for_any_balanced_dispatch_through_the_slack(case, large, monkeypatch):
    if large:  # the paths of large cases: sparse H with its transpose, h(x) kept compact, the layer's split mode
        import hardlinear.constraints.family as constraints
        import hardlinear.layers.feasibility as feasibility

        monkeypatch.setattr(constraints, "DENSE_LIMIT", 10)
        monkeypatch.setattr(feasibility, "DENSE_LIMIT", 10)
    tight = build_problem("ed", case=case, thermal_penalty=1.0, form="inequality" if large else "standard")
    net = tight.network
    gen = torch.Generator().manual_seed(2)
    xi = tight.sample(512, gen)
    pmin, pmax = torch.as_tensor(net.pmin), torch.as_tensor(net.pmax)
    pg = pmin + torch.rand(512, len(pmin), generator=gen, dtype=torch.float64) * (pmax - pmin)
    pg, _ = proportional_response(pg, tight.loads(xi).sum(dim=1), pmin, pmax)
    df = tight.thermal_slack(xi, pg)
    y = tight.to_form(xi, torch.cat([pg, df], dim=1))
    # exactly: the slack's rounding guard covers the other sum by which the family evaluates the line rows
    assert tight.ineq_resid(xi, y).max() <= 0.0 and tight.eq_resid(xi, y).abs().max() <= 1e-12
    assert (df == 0).any()  # lines well inside their limit keep df exactly 0
    if case != CASE:
        assert (df > 0).any()  # case118: random dispatches overload some lines
    if large:
        from hardlinear.layers.feasibility import SlackOperator

        slacks = SlackOperator(tight.compact)
        assert slacks.mode == "split" and slacks.compact_rhs and tight.compact._split_H(y) is not None
        assert slacks.slack(xi, y, slacks.rhs(xi, y)).min() >= 0.0  # the layer's own sums agree, exactly


def test_the_thermal_slack_reuses_the_loads_flows_only_for_equal_inputs(ed):
    gen = torch.Generator().manual_seed(5)
    xi = ed.sample(16, gen)
    pg = torch.rand(16, len(ed.network.gen_bus), generator=gen, dtype=torch.float64)

    def flows(x, like=pg):
        return torch.cat(ed._load_flows(x, like), dim=1)

    def fresh(x, like=pg):
        ed._load_memo = None
        return flows(x, like)

    want = fresh(xi)
    kept = ed._load_memo[1][0]
    flows(xi.clone())
    assert ed._load_memo[1][0] is kept  # equal values in another tensor: reused
    other = xi.clone()
    other[3] = -other[3]
    assert torch.equal(flows(other), fresh(other)) and not torch.equal(fresh(other), want)
    changed = xi.clone()
    flows(changed)
    changed[0] *= 0.5  # changed in place after the call: seen
    assert torch.equal(flows(changed), fresh(changed)) and not torch.equal(flows(changed), want)
    assert flows(xi, pg.float()).dtype == torch.float32  # another dtype: its own
    wanted = xi.clone().requires_grad_(True)  # inputs that require grad: never reused, never kept
    ed._load_flows(wanted, pg)[0].sum().backward()
    assert wanted.grad is not None and ed._load_memo is None
    reused = ed.thermal_slack(xi, pg)
    ed._load_memo = None
    assert torch.equal(reused, ed.thermal_slack(xi, pg))


@pytest.mark.parametrize(
    "option, value, phrase",
    [("load_noise", 1.2, "load_noise must be in"), ("load_low", 0.0, "load_low"), ("uncertainty", 1.5, "uncertainty must be in"),
     ("thermal_penalty", -1.0, "thermal_penalty")],
)
def test_bad_options_name_the_fix(option, value, phrase):
    with pytest.raises(ValueError, match=phrase):
        build_problem("ed", case=CASE, **{option: value})


def test_the_rule_exists_at_pglearns_range(ed):
    from hardlinear.rules import solve_decision_rule

    rule = solve_decision_rule(ed)
    assert rule.t_star > 0


def test_slack_repair_keeps_the_rule_feasible_and_lowers_its_cost(ed):
    """The rule's safe point carries df >= t* on every line (its margin holds on the slack rows too); lowering each
    slack to the smallest its line rows allow keeps every row and only lowers the objective (issue 42)."""
    from hardlinear.rules import solve_decision_rule

    rule = solve_decision_rule(ed)
    xi = ed.sample(64, torch.Generator().manual_seed(4))
    y = rule(xi)
    repaired = ed.repair_slack(xi, y)
    assert ed.ineq_resid(xi, repaired).max() <= 1e-12 and ed.eq_resid(xi, repaired).abs().max() <= 1e-12
    assert (ed.objective(xi, repaired) <= ed.objective(xi, y) + 1e-9).all()
    assert (ed.objective(xi, repaired) < 0.01 * ed.objective(xi, y)).all()  # the slack was most of the rule's cost


def test_slack_repair_is_refused_where_there_is_no_slack():
    from hardlinear.methods.base import Context, NotApplicable
    from hardlinear.methods.proposed import Proposed

    with pytest.raises(NotApplicable, match="problem=ed has them"):
        Proposed(slack_repair=True).setup(build_problem("dcopf_14"), Context(cache_dir=None))


class _Fixed(torch.nn.Module):
    """A stand-in task network that returns a given output (hostile outputs for the layer's guarantee)."""

    def __init__(self, out: torch.Tensor) -> None:
        super().__init__()
        self.out = out
        self.dummy = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        return self.out[: xi.shape[0]].to(xi.dtype) + 0.0 * self.dummy


@pytest.fixture(scope="module")
def proposed_pair(ed):
    """The proposed method with the slack repaired after the blend, and before and after (``both``), on one rule."""
    from hardlinear.methods.base import Context
    from hardlinear.methods.proposed import Proposed

    methods = Proposed(slack_repair=True), Proposed(slack_repair="both"), Proposed(slack_repair="zero")
    for m in methods:
        m.setup(ed, Context(cache_dir=None, dtype=torch.float64))
        m.eval()
    return methods


def _hostile_outputs(ed, batch: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(7)
    normal = torch.randn(batch, ed.n, generator=gen, dtype=torch.float64)
    nan = normal.clone()
    nan[::3, 2] = float("nan")
    inf = normal.clone()
    inf[1::4, 0] = float("inf")
    return {"random": normal, "huge": 1e6 * normal, "enormous": 1e300 * normal, "nan": nan, "inf": inf}


@pytest.mark.parametrize("mode", ["both", "zero"])
@pytest.mark.parametrize("kind", ["random", "huge", "enormous", "nan", "inf"])
def test_slack_set_before_the_blend_stays_exactly_feasible_under_hostile_task_outputs(ed, proposed_pair, kind, mode):
    """slack_repair=both|zero (issue 42): the slack set before the blend changes nothing of the guarantee: every output
    is finite and feasible (inequalities exactly, equalities to float64 rounding), NaN / inf / overflowing task rows
    included, on the unfused predict path these modes take; the slack after the blend is the smallest."""
    both = proposed_pair[1] if mode == "both" else proposed_pair[2]
    xi = torch.cat([ed.sample(24, torch.Generator().manual_seed(5)), torch.ones(4, ed.k), -torch.ones(4, ed.k)])
    both.net = _Fixed(_hostile_outputs(ed, xi.shape[0])[kind])
    with torch.no_grad():
        y = both.predict(xi).y
    assert torch.isfinite(y).all()
    scale = 1.0 + ed.loads(xi).sum(dim=1, keepdim=True)
    assert ed.ineq_resid(xi, y).max() <= 0.0
    assert (ed.eq_resid(xi, y).abs() / scale).max() <= 1e-12
    s = ed.variable_slices()
    # the slack is the smallest its line rows allow
    assert torch.allclose(y[:, s["df"]], ed.thermal_slack(xi, y[:, s["pg"]]), atol=1e-12)


def test_slack_repair_both_never_raises_alpha_and_the_after_repair_never_raises_the_objective(ed, proposed_pair):
    """Before the blend the repair leaves pg (hence the generator-bound rows) as the projection made it and makes
    every line row hold, so alpha can only fall against the after-only repair of the same task output; the repair
    after the blend only lowers the slack, so it never raises the objective of the blend it is given."""
    after, both, _ = proposed_pair
    xi = ed.sample(64, torch.Generator().manual_seed(6))
    out = 3.0 * torch.randn(64, ed.n, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    alphas = {}
    for m in (after, both):
        m.net = _Fixed(out)
        with torch.no_grad():
            blend = m.blend(xi)
            alphas[m.slack_mode] = m.layer.last_stats["alpha"]
            repaired = ed.repair_slack(xi, blend)
        assert (ed.objective(xi, repaired) <= ed.objective(xi, blend) + 1e-9 * ed.objective(xi, blend).abs()).all()
    assert (alphas["both"] <= alphas["after"] + 1e-12).all()
    assert (alphas["both"] < alphas["after"]).any()  # the line rows bound some of these random outputs


def test_slack_repair_option_is_checked():
    from hardlinear.methods.proposed import Proposed

    with pytest.raises(ValueError, match="slack_repair must be"):
        Proposed(slack_repair="before")
    assert Proposed(slack_repair="true").slack_mode == "after" and Proposed(slack_repair="both").slack_mode == "both"
    assert Proposed(slack_repair="zero").slack_mode == "zero"


def _refined(ed, geometry: str = "euclidean"):
    """The proposed method with refine=problem (the dispatch's map onto the limits and the balance, issue 42) and
    both slack steps."""
    from hardlinear.methods.base import Context
    from hardlinear.methods.proposed import Proposed

    m = Proposed(refine="problem", slack_repair="both", refine_geometry=geometry)
    m.setup(ed, Context(cache_dir=None, dtype=torch.float64))
    m.eval()
    return m


@pytest.fixture(scope="module")
def refined(ed):
    return _refined(ed)


@pytest.mark.parametrize("geometry", ["euclidean", "entropic", "proportional"])
@pytest.mark.parametrize("kind", ["random", "huge", "enormous", "nan", "inf"])
def test_refine_problem_stays_exactly_feasible_under_hostile_task_outputs(ed, kind, geometry):
    """The blend after the refinement keeps the guarantee whatever reaches it; finite outputs of the refinement
    need (almost) no blend."""
    refined = _refined(ed, geometry)
    xi = torch.cat([ed.sample(24, torch.Generator().manual_seed(5)), torch.ones(4, ed.k), -torch.ones(4, ed.k)])
    refined.net = _Fixed(_hostile_outputs(ed, xi.shape[0])[kind])
    with torch.no_grad():
        pred = refined.predict(xi)
    y = pred.y
    assert torch.isfinite(y).all()
    scale = 1.0 + ed.loads(xi).sum(dim=1, keepdim=True)
    assert ed.ineq_resid(xi, y).max() <= 0.0
    assert (ed.eq_resid(xi, y).abs() / scale).max() <= 1e-12
    if kind in ("random", "huge"):
        assert pred.extras["alpha"].max() <= 1e-9  # the refinement already landed in C(x)


def test_refine_problem_is_refused_where_the_problem_has_no_exact_map():
    from hardlinear.methods.base import Context, NotApplicable
    from hardlinear.methods.proposed import Proposed

    with pytest.raises(NotApplicable, match="problem=ed has one"):
        Proposed(refine="problem").setup(build_problem("dcopf_14"), Context(cache_dir=None))


def test_refine_problem_needs_no_slack_step_before_it(ed, refined):
    """With refine=problem the slack step before the blend is skipped (the refinement maps pg alone, and the
    balance's uniform shift does not move its result): outputs and gradients equal those of slack_repair=true."""
    from hardlinear.methods.base import Context
    from hardlinear.methods.proposed import Proposed

    after = Proposed(refine="problem", slack_repair=True)
    after.setup(ed, Context(cache_dir=None, dtype=torch.float64))
    xi = ed.sample(16, torch.Generator().manual_seed(3))
    raw = 3.0 * torch.randn(16, ed.n, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    grads = []
    for m in (refined, after):
        out = raw.clone().requires_grad_(True)
        m.net = _Fixed(out)
        y = m(xi)
        (y @ torch.linspace(-1.0, 2.0, ed.n, dtype=torch.float64)).sum().backward()
        grads.append((y.detach(), out.grad))
    assert torch.allclose(grads[0][0], grads[1][0], rtol=0, atol=1e-12)
    assert torch.allclose(grads[0][1], grads[1][1], rtol=0, atol=1e-12)


def test_guard_gradient_option_is_checked_and_named_in_the_variant():
    from hardlinear.methods.proposed import Proposed

    with pytest.raises(ValueError, match="guard_gradient must be true or false"):
        Proposed(guard_gradient="no")
    assert "guard_gradient=false" in Proposed(guard_gradient=False).describe()["variant"]
    assert "guard_gradient" not in Proposed().describe()["variant"]


def test_the_recipes_polytope_holds_every_draw_and_only_shrinks_the_set():
    """input_set=recipe: PGLearn's draws all lie in the polytope; its corners of the box that no draw reaches (one load
    at its highest factor, another at its lowest) lie outside; and the rule's margin over it is at least the box's."""
    from hardlinear.rules import solve_decision_rule

    recipe = build_problem("ed", case=CASE, input_set="recipe")
    poly = recipe.compact.polytope
    xi = recipe.sample(5000, torch.Generator().manual_seed(2))
    assert poly.violation(xi).max() <= 1e-12
    corner = -torch.ones(1, recipe.k, dtype=torch.float64)
    corner[0, 0] = 1.0
    assert poly.violation(corner).item() > 0.1
    box_rule, recipe_rule = solve_decision_rule(build_problem("ed", case=CASE)), solve_decision_rule(recipe)
    assert recipe_rule.t_star >= box_rule.t_star * (1 - 1e-7)  # Clarabel on the polytope LP: ~1e-8 of t*
    assert (recipe.ineq_resid(xi, recipe_rule(xi)).max() <= 0).item()


def test_case89_has_a_rule_over_the_recipes_set_and_none_over_its_box():
    from hardlinear.rules import DecisionRuleInfeasible, solve_decision_rule

    recipe = build_problem("ed", case="pglib_opf_case89_pegase", input_set="recipe")
    rule = solve_decision_rule(recipe)
    assert rule.t_star > 0.05 and rule.info["free_slacks"] == len(recipe.limited)
    xi = recipe.sample(2000, torch.Generator().manual_seed(4))  # every row holds its margin at the recipe's draws
    assert recipe.ineq_resid(xi, rule(xi)).max() <= -rule.t_star * (1 - 1e-9)
    with pytest.raises(DecisionRuleInfeasible):
        solve_decision_rule(build_problem("ed", case="pglib_opf_case89_pegase"), find_max_uncertainty=False)


def test_the_recipes_total_load_range_holds_every_draw_and_keeps_the_box_as_bounding_box():
    """input_set=recipe_total at case89 (6 of its 35 loads negative): every draw's total load is inside the two rows,
    draws come near both ends, the box is the set's bounding box (2k LPs agree), and the box's own extreme totals
    (positive loads high, negative ones low) lie outside."""
    from hardlinear.constraints.polytope import make_input_set

    problem = build_problem("ed", case="pglib_opf_case89_pegase", input_set="recipe_total")
    poly = problem.compact.polytope
    low, high = problem.recipe_total_range()
    xi = problem.sample(20000, torch.Generator().manual_seed(5))
    assert poly.violation(xi).max() <= 0
    totals = problem.loads(xi).sum(dim=1)
    assert low <= totals.min() and totals.max() <= high
    pd0 = problem.network.pd[problem.load_bus]
    e = problem.load_noise
    for factor, noise, end in ((problem.load_high, np.where(pd0 > 0, 1 + e, 1 - e), high), (problem.load_low, np.where(pd0 > 0, 1 - e, 1 + e), low)):
        draw = torch.from_numpy((factor * noise - problem.centre) / problem.half_width)[None]  # the recipe's draw at that end
        assert problem.loads(draw).sum().item() == pytest.approx(end, rel=1e-12) and poly.violation(draw).item() <= 0
    _, box_lo, box_hi = make_input_set(poly.A, poly.b, problem.compact.box.lo, problem.compact.box.hi)
    assert np.allclose(box_lo, -1.0, atol=1e-9) and np.allclose(box_hi, 1.0, atol=1e-9)
    widest = torch.from_numpy(np.where(pd0 > 0, 1.0, -1.0))[None]
    assert poly.violation(widest).item() > 0 and poly.violation(-widest).item() > 0


def test_case89s_rule_over_the_total_load_range_has_the_recipe_polytopes_margin():
    """The rows read the loads through the total alone (hardlinear.rules.rank_one), so the two-row set gives the
    margin of the recipe's 1,190-row polytope: Clarabel on each, and rank_one on the two-row set."""
    from hardlinear.rules import solve_decision_rule

    case = "pglib_opf_case89_pegase"
    polytope = solve_decision_rule(build_problem("ed", case=case, input_set="recipe")).t_star
    total = build_problem("ed", case=case, input_set="recipe_total")
    assert solve_decision_rule(total, solver="clarabel").t_star == pytest.approx(polytope, rel=1e-7)
    rule = solve_decision_rule(total, solver="rank_one")
    assert rule.t_star == pytest.approx(polytope, rel=1e-7)
    xi = total.sample(2000, torch.Generator().manual_seed(6))
    assert total.ineq_resid(xi, rule(xi)).max() <= -rule.t_star * (1 - 1e-9)
    from hardlinear.rules.checks import reverify

    assert reverify(total, rule) is None  # a cached rule over the two rows is re-verified by the slab's closed form


@pytest.mark.parametrize(
    "options, phrase",
    [({"input_set": "hull"}, "input_set must be one of"), ({"input_set": "recipe", "uncertainty": 0.5}, "use one or the other"),
     ({"input_set": "recipe_total", "uncertainty": 0.5}, "use one or the other")],
)
def test_input_set_options_name_the_fix(options, phrase):
    with pytest.raises(ValueError, match=phrase):
        build_problem("ed", case=CASE, **options)
