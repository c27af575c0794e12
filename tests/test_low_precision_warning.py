"""Issue 44 item 9: a float32 network output through ``hardlinear.feasibility_layer`` is no longer accepted
silently: the layer says once that the output is float32 and what its equalities then hold to."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import hardlinear


@pytest.fixture(scope="module")
def constraints():
    # the README's first example: three generators in [0, 1] meet a demand 1.5 + 0.5 theta_0 + 0.3 theta_1
    return hardlinear.LinearConstraints(-np.ones(2), np.ones(2), G=np.ones((1, 3)), g=([1.5], [[0.5, 0.3]]),
                                        H=np.r_[np.eye(3), -np.eye(3)], h=np.r_[np.ones(3), np.zeros(3)])


def _eq_residual(theta: torch.Tensor, y: torch.Tensor) -> float:
    demand = 1.5 + 0.5 * theta[:, 0] + 0.3 * theta[:, 1]
    return float((y.double().sum(1) - demand).abs().max())


def test_float32_output_warns_once_and_says_what_it_costs(constraints, tmp_path):
    layer = hardlinear.feasibility_layer(constraints, cache_dir=tmp_path, progress=False)
    theta = constraints.box.sample(64)
    task = torch.randn(64, constraints.n, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    with pytest.warns(UserWarning, match=r"y_task is float32, so the layer returns float32 .* pass y_task\.double\(\)"):
        y32 = layer(theta, task.float())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per layer: a training loop is not flooded
        layer(theta, task.float())
        y64 = layer(theta, task)
    assert y32.dtype == torch.float32 and y64.dtype == torch.float64
    # what the warning says: float32 equalities to float32 rounding, float64 ones to float64's
    assert 1e-9 < _eq_residual(theta, y32) < 1e-5 and _eq_residual(theta, y64) < 1e-13


def test_float64_and_an_explicit_opt_out_are_quiet(constraints, tmp_path):
    theta = constraints.box.sample(8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hardlinear.feasibility_layer(constraints, cache_dir=tmp_path, progress=False)(theta, torch.zeros(8, 3, dtype=torch.float64))
        quiet = hardlinear.feasibility_layer(constraints, cache_dir=tmp_path, progress=False, warn_low_precision=False)
        assert quiet(theta, torch.zeros(8, 3)).dtype == torch.float32
