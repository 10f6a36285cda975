"""The per-member bases: σBN is a ``MemberBatchNorm``, σLN a ``MemberNorm``, with the parameters,
buffers and checkpoint keys they had (FiLM-Ensemble's BatchNorm on the same base: the lab's
lab/tests/members/test_member_norm.py)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torch_uncertainty_signorm.members.norm import MemberBatchNorm, MemberNorm
from torch_uncertainty_signorm.signorm.layers import SigmaBatchNorm2d, SigmaLayerNorm

M = 3


def test_sigma_batch_norms_keep_their_state_dict_keys_and_parameter_order():
    """Checkpoint keys and parameter order (the optimizer state's) as written before the base."""
    sigma = SigmaBatchNorm2d(4, M)
    converted = SigmaBatchNorm2d.from_module(nn.BatchNorm2d(4), M, pretrained=True)
    stats = ["running_mean", "running_var", "num_batches_tracked"]
    assert list(sigma.state_dict()) == ["scale_logits", *stats]
    assert list(converted.state_dict()) == ["scale_logits", "magnitude", "sign", "shift", *stats]
    assert sigma.running_mean.shape == sigma.running_var.shape == (M, 4)


def test_the_base_checks_the_rows_and_features():
    assert isinstance(SigmaBatchNorm2d(4, M), MemberBatchNorm)
    assert isinstance(SigmaLayerNorm(4, M), MemberNorm)
    assert not isinstance(SigmaLayerNorm(4, M), MemberBatchNorm)
    layer = SigmaBatchNorm2d(4, M)
    with pytest.raises(
        ValueError,
        match=r"SigmaBatchNorm2d expects \(B·M, 4, \.\.\.\) inputs, got shape \(6, 5, 2, 2\)",
    ):
        layer(torch.randn(6, 5, 2, 2))
    with pytest.raises(ValueError, match=r"SigmaBatchNorm2d expects a batch of B·M rows .* got 4"):
        layer(torch.randn(4, 4, 2, 2))
