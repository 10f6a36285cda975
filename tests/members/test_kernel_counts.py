"""One normalization kernel per σNorm layer, whatever the number of members M, counted below
autograd (tests/fixtures/kernel_counts.py; FiLM-Ensemble's BatchNorm: the lab's
lab/tests/members/test_kernel_counts.py)."""

from __future__ import annotations

import pytest
import torch

from fixtures.backbones import tiny_resnet
from fixtures.kernel_counts import NormKernelCounter
from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.signorm.layers import (
    SigmaBatchNorm1d,
    SigmaBatchNorm2d,
    SigmaGroupNorm,
    SigmaLayerNorm,
    SigmaLayerNorm2d,
    SigmaRMSNorm,
)

LAYERS = {
    "σBN1d": (lambda m: SigmaBatchNorm1d(6, m), (6,)),
    "σBN2d": (lambda m: SigmaBatchNorm2d(6, m), (6, 4, 4)),
    "σGN": (lambda m: SigmaGroupNorm(2, 6, m), (6, 4, 4)),
    "σLN": (lambda m: SigmaLayerNorm(6, m), (5, 6)),
    "σLN2d": (lambda m: SigmaLayerNorm2d(6, m), (6, 3, 3)),
    "σRMSNorm": (lambda m: SigmaRMSNorm(6, m), (5, 6)),
}


@pytest.mark.parametrize("num_estimators", [1, 3, 8])
@pytest.mark.parametrize("kind", LAYERS)
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_one_norm_kernel_per_layer_forward_for_any_m(kind, num_estimators, training):
    build, shape = LAYERS[kind]
    layer = build(num_estimators).train(training)
    x = torch.randn(3 * num_estimators, *shape)
    with NormKernelCounter() as counter:
        layer(x)
    assert counter.counts["forward"] == 1, counter.counts


@pytest.mark.parametrize("kind", ["σBN2d", "σGN", "σLN"])
def test_one_norm_kernel_in_backward(kind):
    build, shape = LAYERS[kind]
    layer = build(4)
    x = torch.randn(12, *shape, requires_grad=True)
    out = layer(x)
    with NormKernelCounter() as counter:
        out.sum().backward()
    assert counter.counts["backward"] == 1, counter.counts


@pytest.mark.parametrize("num_estimators", [1, 4])
def test_ensemble_forward_runs_one_norm_kernel_per_signorm_layer(num_estimators):
    model = signorm_ensemble(tiny_resnet(), num_estimators)
    layers = len(model.signorm_layer_names) + 1  # the backbone's σNorm layers and the heads'
    model(torch.randn(2, 3, 32, 32))  # first call checks the rows with hooks
    with NormKernelCounter() as counter:
        model(torch.randn(2, 3, 32, 32))
    assert counter.counts["forward"] == layers, counter.counts
