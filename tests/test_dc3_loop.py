"""DC3's correction at inference runs its loop under TorchScript (layers/peers/dc3.py ``_correct_loop``): the
same floats and the same per-instance step counts as the Python loop it replaced, with the early stop."""

from __future__ import annotations

import pytest
import torch

import hardlinear.layers.peers.dc3 as dc3_layers
from hardlinear.methods.base import Context
from hardlinear.methods.dc3 import DC3
from hardlinear.problems import build_problem


@pytest.mark.parametrize("name", ["dc3_qp", "dcopf_14"])
def test_scripted_correction_equals_the_python_loop_bit_for_bit(name, tmp_path, monkeypatch):
    problem = build_problem(name)
    method = DC3(layer_dtype="float64", max_iter=60)
    method.setup(problem, Context(cache_dir=str(tmp_path), progress=False))
    method.eval()
    xi = problem.sample(32, generator=torch.Generator().manual_seed(0))
    assert isinstance(dc3_layers._CORRECT, torch.jit.ScriptFunction)
    scripted = method.predict(xi)
    monkeypatch.setattr(dc3_layers, "_CORRECT", dc3_layers._correct_loop)
    python = method.predict(xi)
    assert torch.equal(scripted.y, python.y) and torch.equal(scripted.iterations, python.iterations)
    assert int(scripted.iterations.max()) > 0  # the loop ran (an untrained network violates)
