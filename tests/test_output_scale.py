"""``method.output_scale`` (issue 42): the task network's outputs in units of each variable's stated range, read
from the compact constraints, and folded by the fused path."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hardlinear.constraints.family import constant_variable_bounds
from hardlinear.layers.network import OutputAffine
from hardlinear.methods.base import Context
from hardlinear.methods.proposed import Proposed
from hardlinear.problems import build_problem


def test_the_bounds_are_the_generator_limits_and_the_fixed_values():
    ed = build_problem("ed", case="pglib_opf_case14_ieee")
    lo, hi = constant_variable_bounds(ed.compact)
    net, sl = ed.network, ed.variable_slices()
    np.testing.assert_array_equal(lo[sl["pg"]], net.pmin)
    np.testing.assert_array_equal(hi[sl["pg"]], net.pmax)
    assert (lo[sl["df"]] == 0.0).all() and np.isposinf(hi[sl["df"]]).all()  # df >= 0, no upper limit


def test_only_constant_single_variable_rows_bound_a_variable():
    """``y0 <= 2`` and ``-2 y0 <= 2`` bound y0 to [-1, 2]; ``y1 <= 1 + xi`` (input-dependent) and ``y0 + y1 <= 3``
    (two variables) bound nothing; ``2 y2 = 4`` fixes y2 at 2."""
    from hardlinear.constraints.family import InputBox, JointlyLinearFamily

    H = np.array([[1.0, 0, 0], [-2.0, 0, 0], [0, 1.0, 0], [1.0, 1.0, 0]])
    B_ineq = np.array([[2.0, 0], [2.0, 0], [1.0, 1.0], [3.0, 0]])
    family = JointlyLinearFamily(box=InputBox.symmetric(1), G=np.array([[0, 0, 2.0]]), B_eq=np.array([[4.0, 0]]), H=H, B_ineq=B_ineq)
    lo, hi = constant_variable_bounds(family)
    np.testing.assert_array_equal(lo, [-1.0, -np.inf, 2.0])
    np.testing.assert_array_equal(hi, [2.0, np.inf, 2.0])


def test_output_affine_maps_the_unit_range_onto_the_box():
    affine = OutputAffine(np.array([0.0, 1.0, -np.inf, 2.0]), np.array([4.0, 1.0, 3.0, np.inf]))
    out = affine(torch.tensor([[-1.0, 0.5, 0.25, 0.25], [1.0, 0.5, 0.25, 0.25]]))
    assert torch.equal(out[:, 0], torch.tensor([0.0, 4.0]))  # [-1, 1] -> [lo, hi]
    assert torch.equal(out[:, 1], torch.tensor([1.5, 1.5]))  # a fixed variable: shifted to its value, unscaled
    assert torch.equal(out[:, 2:], torch.full((2, 2), 0.25))  # half-bounded: left as it is
    with pytest.raises(ValueError, match="lo <= hi"):
        OutputAffine(np.array([1.0]), np.array([0.0]))


def test_the_fused_path_folds_the_scaling():
    problem = build_problem("dcopf_14")
    method = Proposed(out_of_domain="count", output_scale=True)
    torch.manual_seed(0)
    method.setup(problem, Context(cache_dir=None, dtype=torch.float64, seed=0, progress=False))
    assert isinstance(method.net.net[-1], OutputAffine)
    assert "output_scale" in method.describe()["variant"]
    method.eval()
    xi = problem.sample(64, torch.Generator().manual_seed(1))
    with torch.no_grad():
        fused = method.predict(xi).y
        method.fused_inference = False
        plain = method.predict(xi).y
    assert method.fused_module() is not None
    assert float((fused - plain).abs().max()) <= 1e-12 * (1.0 + float(plain.abs().max()))
