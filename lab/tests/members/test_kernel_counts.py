"""One normalization kernel per FiLM-Ensemble BatchNorm, whatever the number of members M, as
per σNorm layer (the method's tests/members/test_kernel_counts.py)."""

from __future__ import annotations

import pytest
import torch

from fixtures.kernel_counts import NormKernelCounter
from signorm_lab.baselines import FiLMBatchNorm


@pytest.mark.parametrize("num_estimators", [1, 3, 8])
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_one_norm_kernel_per_film_layer_forward_for_any_m(num_estimators, training):
    layer = FiLMBatchNorm(6, num_estimators).train(training)
    with NormKernelCounter() as counter:
        layer(torch.randn(3 * num_estimators, 6, 4, 4))
    assert counter.counts["forward"] == 1, counter.counts


def test_one_norm_kernel_in_film_backward():
    out = FiLMBatchNorm(6, 4)(torch.randn(12, 6, 4, 4, requires_grad=True))
    with NormKernelCounter() as counter:
        out.sum().backward()
    assert counter.counts["backward"] == 1, counter.counts
