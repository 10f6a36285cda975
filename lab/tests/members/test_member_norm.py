"""FiLM-Ensemble's BatchNorm is a ``MemberBatchNorm``, as σBN, with the parameters, buffers and
checkpoint keys it had, and the base's checks (σBN's: the method's
tests/members/test_member_norm.py)."""

from __future__ import annotations

import pytest
import torch

from signorm_lab.baselines import FiLMBatchNorm
from torch_uncertainty_signorm.members.norm import MemberBatchNorm

M = 3


def test_film_batch_norm_keeps_its_state_dict_keys_and_parameter_order():
    """Checkpoint keys and parameter order (the optimizer state's) as written before the base."""
    film = FiLMBatchNorm(4, M)
    stats = ["running_mean", "running_var", "num_batches_tracked"]
    assert list(film.state_dict()) == ["weight", "bias", *stats]
    assert [name for name, _ in film.named_parameters()] == ["weight", "bias"]
    assert film.running_mean.shape == film.running_var.shape == (M, 4)


def test_the_member_base_checks_film_batch_norm_as_signorms():
    layer = FiLMBatchNorm(4, M)
    assert isinstance(layer, MemberBatchNorm)
    with pytest.raises(
        ValueError,
        match=r"FiLMBatchNorm expects \(B·M, 4, \.\.\.\) inputs, got shape \(6, 5, 2, 2\)",
    ):
        layer(torch.randn(6, 5, 2, 2))
    with pytest.raises(ValueError, match=r"FiLMBatchNorm expects a batch of B·M rows .* got 4"):
        layer(torch.randn(4, 4, 2, 2))
