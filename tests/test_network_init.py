"""The task network's ``init`` option: flax's lecun_normal (Pinet's network, issue 41) against torch's default."""

import math

import pytest
import torch
from torch import nn

from hardlinear.constraints.family import InputBox
from hardlinear.layers.network import MLP


def _box(k: int) -> InputBox:
    return InputBox(lo=-torch.ones(k).numpy(), hi=torch.ones(k).numpy())


def test_lecun_normal_has_flax_variance_zero_bias_and_truncation():
    torch.manual_seed(0)
    net = MLP(_box(400), 3, hidden=400, layers=1, batch_norm=False, standardize=False, init="lecun_normal")
    first = [m for m in net.net if isinstance(m, nn.Linear)][0]
    w = first.weight.detach()
    assert w.std().item() == pytest.approx(1 / math.sqrt(400), rel=0.02)  # variance 1 / fan_in, as flax
    assert w.abs().max().item() <= 2 / math.sqrt(400) / 0.8796 + 1e-9  # truncated at 2 of the normal's std
    assert torch.count_nonzero(first.bias) == 0


def test_torch_default_is_unchanged_and_bad_init_is_named():
    torch.manual_seed(0)
    net = MLP(_box(400), 3, hidden=400, layers=1, batch_norm=False, standardize=False)
    first = [m for m in net.net if isinstance(m, nn.Linear)][0]
    assert first.weight.std().item() == pytest.approx(1 / math.sqrt(3 * 400), rel=0.02)  # U(+-1/sqrt(fan_in))
    assert torch.count_nonzero(first.bias) > 0
    with pytest.raises(ValueError, match="init must be one of"):
        MLP(_box(4), 3, init="xavier")
