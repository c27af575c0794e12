"""The projection onto a box cut by one sum (hardlinear.problems.dispatch_projection) and the dispatch's exact
refinement built on it (issue 42): the projection is checked against its KKT conditions and a real QP solver, its
two backward passes against their definitions. The proposed method with ``refine=problem`` is held to the
guarantee in tests/test_ed.py."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
import torch

from hardlinear.problems import build_problem
from hardlinear.problems.dispatch_projection import entropic_box_sum, project_box_sum


def _instance(batch: int = 6, g: int = 9, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    lo = torch.rand(g, generator=gen, dtype=torch.float64)
    hi = lo + 0.2 + torch.rand(g, generator=gen, dtype=torch.float64)
    q = 3.0 * torch.randn(batch, g, generator=gen, dtype=torch.float64)
    total = lo.sum() + (hi - lo).sum() * torch.rand(batch, generator=gen, dtype=torch.float64)
    return q, total, lo, hi


def test_the_output_meets_the_projections_kkt_conditions():
    """Feasible (the sum to rounding, the limits exactly), and one shift lam with p = q - lam on the free
    coordinates, q - lam <= lo where p = lo and >= hi where p = hi: the optimality conditions of min ||p - q||^2."""
    q, total, lo, hi = _instance(batch=64)
    p = project_box_sum(q, total, lo, hi)
    assert ((p >= lo) & (p <= hi)).all()
    assert torch.allclose(p.sum(dim=1), total, rtol=0, atol=1e-13)
    free = (p > lo) & (p < hi)
    assert free.any(dim=1).all()
    lam = ((q - p) * free).sum(dim=1) / free.sum(dim=1)
    assert torch.allclose((q - p)[free], lam.unsqueeze(1).expand_as(q)[free], atol=1e-12)
    shifted = q - lam.unsqueeze(1)
    assert (shifted[p == lo] <= lo.expand_as(q)[p == lo] + 1e-12).all()
    assert (shifted[p == hi] >= hi.expand_as(q)[p == hi] - 1e-12).all()


def _bisection_reference(q, total, lo, hi, steps: int = 200):
    """The slow way to the same point: bisection on ``lam`` far past float64's resolution."""
    lam_lo, lam_hi = (q - hi).amin(dim=1), (q - lo).amax(dim=1)
    for _ in range(steps):
        mid = 0.5 * (lam_lo + lam_hi)
        above = torch.clamp(q - mid.unsqueeze(1), lo, hi).sum(dim=1) > total
        lam_lo, lam_hi = torch.where(above, mid, lam_lo), torch.where(above, lam_hi, mid)
    return torch.clamp(q - (0.5 * (lam_lo + lam_hi)).unsqueeze(1), lo, hi)


def test_degenerate_instances_match_a_bisection_reference():
    """Ties among the breakpoints (repeated q, equal widths), fixed coordinates (lo = hi) and totals at the ends of
    the reachable range: the breakpoint search lands on the same point as a long bisection."""
    gen = torch.Generator().manual_seed(7)
    lo = torch.tensor([0.0, 0.5, 0.5, 1.0, 0.2, 0.0, 0.3], dtype=torch.float64)
    hi = torch.tensor([1.0, 1.5, 1.5, 1.0, 0.2, 2.0, 0.3], dtype=torch.float64)  # two fixed coordinates
    q = torch.tensor([0.3, 0.3, 0.3, 0.3, 5.0, -4.0, 0.3], dtype=torch.float64).repeat(40, 1)
    q[20:] += torch.randint(-2, 3, (20, 7), generator=gen).double() * 0.5  # coarse grid: many equal breakpoints
    ends = torch.tensor([lo.sum(), hi.sum()], dtype=torch.float64)
    total = torch.cat([ends, lo.sum() + (hi - lo).sum() * torch.rand(38, generator=gen, dtype=torch.float64)])
    total[10:14] = torch.tensor([2.8, 3.3, 4.3, 5.5], dtype=torch.float64)  # sums that fall on breakpoints
    p = project_box_sum(q, total, lo, hi)
    assert ((p >= lo) & (p <= hi)).all()
    assert torch.allclose(p.sum(dim=1), total, rtol=0, atol=1e-13)
    assert torch.allclose(p, _bisection_reference(q, total, lo, hi), rtol=0, atol=1e-12)


def test_large_batches_take_bisection_to_the_same_point(monkeypatch):
    import hardlinear.problems.dispatch_projection as dp

    q, total, lo, hi = _instance(batch=64, seed=5)
    by_sort = project_box_sum(q, total, lo, hi)
    monkeypatch.setattr(dp, "SORT_MAX_ENTRIES", 0)
    assert torch.allclose(project_box_sum(q, total, lo, hi), by_sort, rtol=0, atol=1e-13)


def test_it_agrees_with_a_qp_solver():
    q, total, lo, hi = _instance(batch=4, seed=3)
    p = project_box_sum(q, total, lo, hi)
    for b in range(len(q)):
        x = cp.Variable(q.shape[1])
        constraints = [cp.sum(x) == total[b].item(), x >= lo.numpy(), x <= hi.numpy()]
        cp.Problem(cp.Minimize(cp.sum_squares(x - q[b].numpy())), constraints).solve(
            solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12
        )
        np.testing.assert_allclose(p[b].numpy(), x.value, atol=1e-7)


def test_an_unreachable_total_puts_every_coordinate_at_the_nearer_limits():
    q, _, lo, hi = _instance(batch=2)
    total = torch.tensor([lo.sum() - 1.0, hi.sum() + 1.0], dtype=torch.float64)
    p = project_box_sum(q, total, lo, hi)
    assert torch.equal(p[0], lo) and torch.equal(p[1], hi)


def test_the_exact_backward_is_the_projections_jacobian():
    q, total, lo, hi = _instance(batch=3, g=6, seed=1)
    assert torch.autograd.gradcheck(lambda v: project_box_sum(v, total, lo, hi, "exact"), (q.clone().requires_grad_(),))


def test_the_inward_backward_passes_only_gradients_that_leave_a_limit():
    """Same value as the exact one; on free coordinates the same gradient when no limit coordinate joins; a
    coordinate at its upper limit gets the (mean-free) gradient when descent lowers it, none when descent would
    raise it further."""
    lo, hi = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    q = torch.tensor([[5.0, 0.3, 0.2]], dtype=torch.float64, requires_grad=True)  # coordinate 0 clipped at 1
    total = torch.tensor([1.5], dtype=torch.float64)
    p_in = project_box_sum(q, total, lo, hi)
    p_ex = project_box_sum(q, total, lo, hi, "exact")
    assert torch.equal(p_in, p_ex) and p_in[0, 0] == 1.0
    # descent on +w.p lowers coordinate 0 when its weight exceeds the others': the gradient passes
    (g_in,) = torch.autograd.grad((p_in * torch.tensor([[3.0, 1.0, 1.0]])).sum(), q)
    (g_ex,) = torch.autograd.grad((p_ex * torch.tensor([[3.0, 1.0, 1.0]])).sum(), q)
    assert g_ex[0, 0] == 0.0 and g_in[0, 0] > 0.0
    assert torch.allclose(g_in.sum(), torch.zeros((), dtype=torch.float64))  # the balance's direction removed
    # a weight below the others' would raise it past its limit: blocked, as in the exact Jacobian
    (g_in,) = torch.autograd.grad((project_box_sum(q, total, lo, hi) * torch.tensor([[-1.0, 1.0, 2.0]])).sum(), q)
    (g_ex,) = torch.autograd.grad((project_box_sum(q, total, lo, hi, "exact") * torch.tensor([[-1.0, 1.0, 2.0]])).sum(), q)
    assert torch.equal(g_in, g_ex)


@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        (dict(q=torch.zeros(2, 3), total=torch.zeros(3), lo=torch.zeros(3), hi=torch.ones(3)), "need q"),
        (dict(q=torch.zeros(2, 3), total=torch.zeros(2), lo=torch.ones(3), hi=torch.zeros(3)), "at most its upper"),
        (dict(q=torch.zeros(2, 3), total=torch.zeros(2), lo=torch.zeros(3), hi=torch.ones(3), gradient="ste"), "gradient must be"),
    ],
)
def test_bad_arguments_are_named(args, phrase):
    with pytest.raises(ValueError, match=phrase):
        project_box_sum(**args)


@pytest.fixture(scope="module")
def ed():
    return build_problem("ed", case="pglib_opf_case14_ieee")


def test_the_dispatch_refinement_lands_in_the_feasible_set_with_the_smallest_slack(ed):
    xi = ed.sample(64, torch.Generator().manual_seed(2))
    y = 2.0 * torch.randn(64, ed.n, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    r = ed.exact_refinement(xi, y)
    scale = 1.0 + ed.loads(xi).sum(dim=1, keepdim=True)
    assert ed.ineq_resid(xi, r).max() <= 1e-12
    assert (ed.eq_resid(xi, r).abs() / scale).max() <= 1e-12
    s = ed.variable_slices()
    assert torch.equal(r[:, s["df"]], ed.thermal_slack(xi, r[:, s["pg"]]))
    # a feasible dispatch is its own projection
    again = ed.exact_refinement(xi, r)
    assert torch.allclose(again, r, atol=1e-12)


# --- the entropic map (method.refine_geometry=entropic) ----------------------------------------------------------
def test_the_entropic_map_meets_the_sum_and_its_bregman_optimality_condition():
    """Strictly inside the box, the sum to rounding, and one shift lam with logit(p) = u - lam on every coordinate:
    the optimality condition of the Bregman projection under the Fermi-Dirac entropy."""
    u, total, lo, hi = _instance(batch=64)
    p = entropic_box_sum(u, total, lo, hi)
    assert bool(((p > lo) & (p < hi)).all())
    assert (p.sum(dim=1) - total).abs().max() <= 1e-12 * total.abs().max()
    t = (p - lo) / (hi - lo)
    shift = u - torch.logit(t)
    assert (shift - shift[:, :1]).abs().max() <= 1e-6  # one lam per row (logit's conditioning near 0 and 1)


def test_the_entropic_map_agrees_with_a_convex_solver():
    """The same point as minimising the Fermi-Dirac Bregman divergence from lo + w sigmoid(u) over the set."""
    u, total, lo, hi = _instance(batch=3, g=6, seed=5)
    u = u / 3.0  # logits away from saturation, where the exponential cone solve is accurate
    p = entropic_box_sum(u, total, lo, hi)
    w = (hi - lo).numpy()
    for b in range(len(u)):
        t = cp.Variable(u.shape[1])
        # sum w [ -H(t) - u t ]: the entropy's Bregman divergence from sigmoid(u), up to a constant
        objective = cp.sum(cp.multiply(w, -cp.entr(t) - cp.entr(1 - t) - cp.multiply(u[b].numpy(), t)))
        constraints = [lo.numpy() @ np.ones(len(w)) + w @ t == total[b].item(), t >= 0, t <= 1]
        cp.Problem(cp.Minimize(objective), constraints).solve(
            solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11
        )
        np.testing.assert_allclose(p[b].numpy(), lo.numpy() + w * t.value, atol=1e-6)


def test_the_entropic_backward_is_its_implicit_jacobian():
    u, total, lo, hi = _instance(batch=3, g=6, seed=1)
    assert torch.autograd.gradcheck(lambda v: entropic_box_sum(v, total, lo, hi), (u.clone().requires_grad_(),))


def test_the_entropic_map_sends_an_unreachable_total_to_the_nearer_limits():
    u, _, lo, hi = _instance(batch=2)
    total = torch.tensor([lo.sum() - 1.0, hi.sum() + 1.0], dtype=torch.float64)
    p = entropic_box_sum(u, total, lo, hi)
    torch.testing.assert_close(p[0], lo, rtol=0, atol=1e-15)
    torch.testing.assert_close(p[1], hi, rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="below its upper"):
        entropic_box_sum(u, total, lo, lo)


def test_the_entropic_dispatch_refinement_is_feasible_and_the_method_names_its_option(ed):
    from hardlinear.methods.proposed import Proposed

    xi = ed.sample(64, torch.Generator().manual_seed(2))
    y = 2.0 * torch.randn(64, ed.n, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    r = ed.exact_refinement(xi, y, geometry="entropic")
    scale = 1.0 + ed.loads(xi).sum(dim=1, keepdim=True)
    assert ed.ineq_resid(xi, r).max() <= 1e-12
    assert (ed.eq_resid(xi, r).abs() / scale).max() <= 1e-12
    with pytest.raises(ValueError, match="geometry must be one of"):
        ed.exact_refinement(xi, y, geometry="kl")
    with pytest.raises(ValueError, match="set method.refine=problem"):
        Proposed(refine_geometry="entropic")
    with pytest.raises(ValueError, match="refine_geometry must be one of"):
        Proposed(refine="problem", refine_geometry="kl")


def _hard_multiplier_rows(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """8 rows ``(u, need, width)``: logits up to +-90, totals a hair inside either end of the range, widths 1e-3 to 5."""
    gen = torch.Generator().manual_seed(seed)
    g = int(torch.randint(2, 300, (1,), generator=gen))
    width = 1e-3 + 5 * torch.rand(g, generator=gen, dtype=torch.float64)
    u = torch.randn(8, g, generator=gen, dtype=torch.float64) * float(30 * torch.rand(1, generator=gen))
    need = width.sum() * torch.rand(8, generator=gen, dtype=torch.float64)
    need[0], need[1] = width.sum() * 1e-9, width.sum() * (1 - 1e-9)
    return u, need, width


def test_the_entropic_multiplier_meets_the_sum_on_hard_instances():
    """Safeguarded Newton on hard rows: logits up to +-90 (saturated coordinates), totals a
    hair inside either end of the range, widths from 1e-3 to 5: the residual within rounding of the sum."""
    from hardlinear.problems.dispatch_projection import _entropic_multiplier

    for seed in range(60):
        u, need, width = _hard_multiplier_rows(seed)
        lam = _entropic_multiplier(u, need, width)
        resid = ((width * torch.sigmoid(u - lam[:, None])).sum(dim=1) - need).abs()
        assert resid.max() <= 1e-12 * width.sum(), seed


def test_the_entropic_multipliers_row_loop_matches_the_batched_steps_on_hard_instances():
    """Small batches take the row loop (Python-float bracket); on the hard rows above, one row at a time meets the
    sum within rounding and lands on the batched loop's dispatch to 1e-12 of the range's total."""
    from hardlinear.problems.dispatch_projection import ROW_LOOP_ROWS, _entropic_multiplier

    assert ROW_LOOP_ROWS < 8  # the batch of 8 below takes the batched loop
    for seed in range(60):
        u, need, width = _hard_multiplier_rows(seed)
        batched = _entropic_multiplier(u, need, width)
        rows = torch.cat([_entropic_multiplier(u[i : i + 1], need[i : i + 1], width) for i in range(8)])
        p_batched, p_rows = (width * torch.sigmoid(u - lam[:, None]) for lam in (batched, rows))
        assert (p_rows.sum(dim=1) - need).abs().max() <= 1e-12 * width.sum(), seed
        assert (p_rows - p_batched).abs().max() <= 1e-12 * width.sum(), seed


def test_the_entropic_multiplier_does_not_cycle_on_a_trained_networks_row():
    """A row on which Newton kept inside its bracket alone cycled between two points (residual 126 p.u. after 100
    steps; the blend then took the rule's output): the halving test converges on it."""
    import json
    from pathlib import Path

    from hardlinear.problems.dispatch_projection import _entropic_multiplier

    row = json.loads((Path(__file__).parent / "fixtures" / "entropic_cycling_row.json").read_text())
    u, width = torch.tensor([row["u"]], dtype=torch.float64), torch.tensor(row["width"], dtype=torch.float64)
    need = torch.tensor([row["need"]], dtype=torch.float64)
    lam = _entropic_multiplier(u, need, width)
    assert float(((width * torch.sigmoid(u - lam[:, None])).sum(dim=1) - need).abs()) <= 1e-12 * float(width.sum())


def test_a_problem_whose_exact_map_has_no_geometry_refuses_the_entropic_one_at_setup():
    from hardlinear.layers.refine import ProblemRefinement
    from hardlinear.methods.base import NotApplicable

    class OneGeometry:
        name = "toy"

        def exact_refinement(self, xi, y):
            return y

    assert ProblemRefinement(OneGeometry()).geometry == "euclidean"
    with pytest.raises(NotApplicable, match="leave method.refine_geometry at 'euclidean'"):
        ProblemRefinement(OneGeometry(), "entropic")


def test_a_saturated_coordinate_stays_inside_its_box():
    """A saturated logit (sigmoid = 1) with a negative lower limit: lo + (hi - lo) * 1 rounds to one unit above hi
    (-0.3 + 0.4 = 0.10000000000000003); the map keeps it at hi, so a saturated generator is at its limit, not over
    it (over it, the dispatch path sent the row to the layer)."""
    lo = torch.tensor([-0.3, 0.0, 0.0], dtype=torch.float64)
    hi = torch.tensor([0.1, 1.0, 1.0], dtype=torch.float64)
    assert float(lo[0] + (hi[0] - lo[0]) * 1.0) > float(hi[0])  # the rounding the map must not inherit
    u = torch.tensor([[80.0, 0.0, 0.0], [80.0, -3.0, 2.0]], dtype=torch.float64)
    p = entropic_box_sum(u, torch.tensor([1.1, 0.9], dtype=torch.float64), lo, hi)
    assert bool(((p >= lo) & (p <= hi)).all()) and float(p[0, 0]) == 0.1
    assert (p.sum(dim=1) - torch.tensor([1.1, 0.9], dtype=torch.float64)).abs().max() <= 1e-15
