"""The per-member bases: σBN and FiLM-Ensemble's BatchNorm share one ``MemberBatchNorm``,
with the parameters, buffers and checkpoint keys they had."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from signorm_lab.baselines import FiLMBatchNorm
from torch_uncertainty_signorm.members.norm import MemberBatchNorm, MemberNorm
from torch_uncertainty_signorm.signorm.layers import SigmaBatchNorm2d, SigmaLayerNorm

M = 3


def test_sigma_and_film_batch_norms_keep_their_state_dict_keys_and_parameter_order():
    """Checkpoint keys and parameter order (the optimizer state's) as written before the base."""
    sigma = SigmaBatchNorm2d(4, M)
    converted = SigmaBatchNorm2d.from_module(nn.BatchNorm2d(4), M, pretrained=True)
    film = FiLMBatchNorm(4, M)
    stats = ["running_mean", "running_var", "num_batches_tracked"]
    assert list(sigma.state_dict()) == ["scale_logits", *stats]
    assert list(converted.state_dict()) == ["scale_logits", "magnitude", "sign", "shift", *stats]
    assert list(film.state_dict()) == ["weight", "bias", *stats]
    assert [name for name, _ in film.named_parameters()] == ["weight", "bias"]
    assert sigma.running_mean.shape == film.running_var.shape == (M, 4)


def test_one_base_runs_both_with_the_same_checks():
    assert isinstance(SigmaBatchNorm2d(4, M), MemberBatchNorm)
    assert isinstance(FiLMBatchNorm(4, M), MemberBatchNorm)
    assert isinstance(SigmaLayerNorm(4, M), MemberNorm)
    assert not isinstance(SigmaLayerNorm(4, M), MemberBatchNorm)
    for layer in (SigmaBatchNorm2d(4, M), FiLMBatchNorm(4, M)):
        name = type(layer).__name__
        with pytest.raises(
            ValueError,
            match=rf"{name} expects \(B·M, 4, \.\.\.\) inputs, got "
            r"shape \(6, 5, 2, 2\)",
        ):
            layer(torch.randn(6, 5, 2, 2))
        with pytest.raises(ValueError, match=rf"{name} expects a batch of B·M rows .* got 4 rows"):
            layer(torch.randn(4, 4, 2, 2))
