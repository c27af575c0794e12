"""Why pre-training matters on dcopf_30 (docs/reproduction.md, "Claims of the paper"): a plateau of the blend.

case30 has two generators that can move (the other four are synchronous condensers, ``pmax = pmin = 0``). A
task output that puts the expensive one above its upper limit is blended back onto that limit, and the cheap one
supplies the rest of the fixed demand: the output's objective is then the same for every such task output, and its
gradient with respect to the task output is exactly zero. A network initialised there never leaves (seeds 1 and 2
of the pre-training table stall at 11.4 %); pre-training to the safe output starts it inside the feasible set.
"""

from __future__ import annotations

import torch

from hardlinear.layers import FeasibilityLayer
from hardlinear.problems import build_problem
from hardlinear.rules import solve_decision_rule


def test_dcopf_30_expensive_generator_over_its_limit_is_a_zero_gradient_plateau(tmp_path):
    problem = build_problem("dcopf_30")
    rule = solve_decision_rule(problem, cache_dir=tmp_path)
    layer = FeasibilityLayer(problem.family, rule)
    pg = torch.as_tensor(problem.decision_indices())
    c = torch.as_tensor(problem.objective_data.c)
    net = problem.network
    assert int((net.pmax > net.pmin).sum()) == 2  # the premise: two dispatchable generators
    expensive = pg[int(torch.argmax(c[pg]))]

    xi = problem.sample(32, torch.Generator().manual_seed(0))
    y_sn = rule(xi).detach()

    def blended(push: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The layer's output, its objective, alpha and the gradient of the mean objective, for the safe output
        moved by ``push`` on the expensive generator (the equality projection rebalances the rest)."""
        y_task = y_sn.clone()
        y_task[:, expensive] += push
        y_task.requires_grad_(True)
        y = layer(xi, y_task)
        objective = problem.objective(xi, y)
        objective.mean().backward()
        return y.detach(), objective.detach(), layer.last_stats["alpha"], y_task.grad

    y_far, obj_far, alpha_far, grad_far = blended(0.6)
    y_farther, obj_farther, alpha_farther, grad_farther = blended(1.2)
    assert (alpha_far > 0.8).all() and (alpha_farther > alpha_far).all()  # far outside, as a random start is
    # the expensive generator is pinned at one value (its limit) and the objective does not depend on the push
    torch.testing.assert_close(y_far[:, expensive], y_farther[:, expensive], rtol=0, atol=1e-12)
    torch.testing.assert_close(obj_far, obj_farther, rtol=1e-12, atol=0)
    assert grad_far.abs().max() <= 1e-9 * c.abs().max() and grad_farther.abs().max() <= 1e-9 * c.abs().max()

    # off the plateau the objective does pull: moving the expensive generator down (inside) has a gradient
    _, _, alpha_inside, grad_inside = blended(-0.005)
    assert (alpha_inside == 0).all() and grad_inside.abs().max() > 1.0
