"""Issue 44 item 5: ``method.predict`` takes numpy arrays (numpy in, numpy out) as well as tensors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_linear_problem import small_arrays

from hardlinear.methods.base import Context, Prediction
from hardlinear.methods.ldr import LDR
from hardlinear.methods.proposed import Proposed
from hardlinear.problems.linear import LinearProblem


@pytest.fixture(scope="module")
def problem() -> LinearProblem:
    return LinearProblem(arrays=small_arrays())


@pytest.mark.parametrize("make", [lambda: Proposed(), lambda: LDR()], ids=["proposed", "ldr"])
def test_numpy_inputs_give_the_tensor_path_s_outputs_as_numpy(problem, make, tmp_path):
    method = make()
    method.setup(problem, Context(cache_dir=str(tmp_path), progress=False))
    method.eval()
    xi = np.random.default_rng(0).uniform(-1, 1, size=(5, 2))
    expected = method.predict(torch.as_tensor(xi))
    got = method.predict(xi)
    assert isinstance(got, Prediction) and isinstance(got.y, np.ndarray) and isinstance(got.iterations, np.ndarray)
    assert got.y.shape == (5, 6) and got.iterations.shape == (5,)
    np.testing.assert_array_equal(got.y, expected.y.detach().numpy())
    one = method.predict(xi[2])  # one input (k,): one output (n,)
    assert one.y.shape == (6,) and one.iterations.shape == ()
    np.testing.assert_array_equal(one.y, method.predict(torch.as_tensor(xi[2:3])).y[0].detach().numpy())  # batch 1 rounds its own way
    # what comes back satisfies the constraints, read with the problem's own residuals
    assert float(problem.eq_resid(torch.as_tensor(xi), torch.as_tensor(got.y)).abs().max()) < 1e-9
    assert float(problem.ineq_resid(torch.as_tensor(xi), torch.as_tensor(got.y)).max()) <= 1e-9
    # integer arrays are read as float64 too
    assert method.predict(np.zeros((2, 2), dtype=np.int64)).y.dtype == got.y.dtype


def test_a_tensor_still_returns_tensors_and_other_inputs_name_the_types(problem, tmp_path):
    method = Proposed()
    method.setup(problem, Context(cache_dir=str(tmp_path), progress=False))
    assert isinstance(method.predict(torch.zeros(3, 2, dtype=torch.float64)).y, torch.Tensor)
    with pytest.raises(TypeError, match=r"Proposed.predict takes a torch.Tensor or a numpy array of inputs \(B, k\); got list"):
        method.predict([[0.0, 0.0]])
