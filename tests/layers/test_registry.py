"""One registry of norm types for conversion and fold-back: exact types, both directions."""

from __future__ import annotations

import pytest
import torch
from fixtures.members import member_rows
from torch import nn

from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.conversion import find_norm_layers
from torch_uncertainty_signorm.layers import SigmaSyncBatchNorm
from torch_uncertainty_signorm.layers.registry import (
    NORM_REGISTRY,
    fold_signorm,
    plain_class_for,
    signorm_class_for,
)

M = 3


def test_every_sigma_class_folds_back_into_a_registered_plain_class():
    for plain, sigma in NORM_REGISTRY.items():
        folded = plain_class_for(sigma.__new__(sigma))
        assert NORM_REGISTRY[folded] is sigma, (plain, sigma)


@pytest.mark.parametrize("name", ["BatchNormAct2d", "GroupNormAct", "LayerNormAct"])
def test_timm_norm_act_layers_are_refused_naming_the_layer(name):
    from timm import layers

    norm_act = getattr(layers, name)(8) if name != "GroupNormAct" else layers.GroupNormAct(8, 2)
    model = nn.Sequential(nn.Conv2d(3, 8, 1), norm_act)
    assert signorm_class_for(norm_act) is None  # a subclass does not match by type
    pattern = rf"Layer '1' is a timm\.layers\.norm_act\.{name}.*activation"
    with pytest.raises(TypeError, match=pattern):
        find_norm_layers(model)


def test_sync_batch_norm_converts_and_exports_to_sync_batch_norm():
    sync = nn.SyncBatchNorm(4)
    with torch.no_grad():
        sync.weight.uniform_(-2, 2), sync.bias.normal_()
        sync.running_mean.normal_(), sync.running_var.uniform_(0.5, 2)
    layer = signorm_class_for(sync).from_module(sync, M, pretrained=True)
    assert type(layer) is SigmaSyncBatchNorm
    with torch.no_grad():
        layer.scale_logits.add_(torch.randn_like(layer.scale_logits))
        layer.running_mean.add_(torch.randn_like(layer.running_mean))
    x = torch.randn(2 * M, 4, 3, 3)
    out = member_rows(layer.eval()(x), M)
    for m, x_m in enumerate(member_rows(x, M)):
        folded = fold_signorm(layer, m).eval()
        assert type(folded) is nn.SyncBatchNorm
        torch.testing.assert_close(folded(x_m), out[m], rtol=1e-5, atol=1e-5)


def test_ensemble_with_sync_batch_norm_layers_exports_its_members():
    from fixtures.backbones import tiny_resnet

    from torch_uncertainty_signorm.export import member_model

    backbone = nn.SyncBatchNorm.convert_sync_batchnorm(tiny_resnet())
    ensemble = signorm_ensemble(backbone, M).eval()
    x = torch.randn(2, 3, 32, 32)
    logits = ensemble(x).unflatten(0, (M, -1))
    member = member_model(ensemble, 1).eval()
    assert any(type(module) is nn.SyncBatchNorm for module in member.modules())
    torch.testing.assert_close(member(x), logits[1], rtol=1e-4, atol=1e-5)
