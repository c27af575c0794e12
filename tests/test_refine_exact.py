"""The refined method (``refine=dr``) under hostile task outputs (issue 40, item 1): huge, tiny, infinite and NaN
outputs at box vertices and uniform inputs, eval and train mode, on DC3's QP, a DC-OPF case and the portfolio,
residuals computed from the problem's matrices in float64.

What is promised (the layer projects and blends in float64 whatever the input dtype; docs/reliability.md):

* inequalities: the layer's guarantee, as for the plain method (``1e-9 + |t*|``);
* equalities: within twice the *floor*, the residual of the same output projected in float64 and rounded once
  to its dtype (no vector of that dtype and size does better), and ``||G y - g|| / (1 + ||g||)`` at most 1e-9
  (float64) or 1e-5 (float32) wherever the floor allows it. A refinement keeps large task outputs large where
  ``C(x)`` is unbounded (DC3's QP: a cone), so there the floor itself passes the promise: in float32, 1.9e-5 for
  outputs of size 2e2 (measured); in float64, 1.3e-8 for task outputs of 1e8. Before the float64 re-projection
  the float32 refined output carried ten times its floor (2.3e-4).
"""

from __future__ import annotations

import warnings

import pytest
import torch

from hardlinear.evaluation.audit import residuals
from hardlinear.layers.equality import EqualityProjector
from hardlinear.methods.base import Context
from hardlinear.methods.proposed import Proposed
from hardlinear.problems import build_problem

SCALES = [1e-30, 1e2, 1e4, 1e8, 1e300, "inf", "nan"]
PROBLEMS = ["dc3_qp", "dcopf_14", "portfolio"]
TOL = {torch.float64: 1e-9, torch.float32: 1e-5}  # relative equality residual, ||G y - g|| / (1 + ||g||)


class HostileNet(torch.nn.Module):
    """Task outputs ``scale * N(0, 1)``; ``inf`` / ``nan``: a third of the entries replaced by it."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n, self.scale = n, 1.0
        self.weight = torch.nn.Parameter(torch.zeros(()))  # train mode has a graph to build

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        out = torch.randn(xi.shape[0], self.n, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        if isinstance(self.scale, str):
            out[:, ::3] = float(self.scale)
            return out + self.weight
        return self.scale * out + self.weight


@pytest.fixture(scope="module")
def methods(tmp_path_factory):
    cache = tmp_path_factory.mktemp("refine-exact")
    out = {}
    for name in PROBLEMS:
        problem = build_problem(name)
        for dtype in ("float64", "float32"):
            method = Proposed(refine="dr", refine_steps=10, refine_eval_steps=30, layer_dtype=dtype,
                              require_positive_margin=name != "portfolio")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                method.setup(problem, Context(cache_dir=str(cache), dtype=torch.float64, progress=False))
            method.net = HostileNet(problem.n)
            gen = torch.Generator().manual_seed(0)
            xi = torch.cat([problem.sample(48, generator=gen), problem.box.vertices(limit=48, generator=gen)])
            out[name, dtype] = (problem, method, xi)
    return out


def relative_eq(family, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    eq, g, _, _ = residuals(family, xi, y)
    return eq.norm(dim=1) / (1.0 + g.norm(dim=1))


@pytest.mark.parametrize("name", PROBLEMS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("mode", ["eval", "train"])
def test_refined_output_keeps_the_equality_promise_under_hostile_outputs(methods, name, dtype, mode):
    problem, method, xi = methods[name, dtype]
    projector = EqualityProjector(problem.family)
    method.train(mode == "train")
    for scale in SCALES:
        method.net.scale = scale
        with torch.set_grad_enabled(mode == "train"):
            y = method(xi.to(method.layer_dtype))
        where = f"{name} {dtype} {mode} scale {scale}"
        assert torch.isfinite(y).all(), where
        xw = xi.to(y.dtype)
        _, _, ineq, _ = residuals(problem.family, xw, y)
        assert float(ineq.max()) <= 1e-9 + max(0.0, -method.t_star), where
        eq = relative_eq(problem.family, xw, y)
        floor = relative_eq(problem.family, xw, projector(xw.double(), y.detach().double()).to(y.dtype))
        tol = TOL[y.dtype]
        assert bool((eq <= 2.0 * floor + tol / 100).all()), f"{where}: {float(eq.max()):.2e} against floor {float(floor.max()):.2e}"
        within = floor <= tol / 2  # where the output's dtype can keep the promise at all
        assert bool((eq[within] <= tol).all()), where


def test_huge_outputs_on_dc3_are_refined_to_large_feasible_points(methods):
    """Why float32 has a floor here: the refined output's size follows the task output's (C(x) is unbounded)."""
    problem, method, xi = methods["dc3_qp", "float32"]
    method.eval()
    method.net.scale = 1e4
    with torch.no_grad():
        y = method(xi.float())
    assert float(y.abs().max()) > 1e3
    floor = relative_eq(problem.family, xi, EqualityProjector(problem.family)(xi, y.double()).float())
    assert float(floor.max()) > 1e-5  # no float32 vector of that size keeps 1e-5: the floor, not the layer
