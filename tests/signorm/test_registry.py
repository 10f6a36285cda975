"""One registry of norm types for conversion and fold-back: exact types, both directions."""

from __future__ import annotations

import pytest
import torch
from timm.layers import norm as timm_norm
from torch import nn

from fixtures.members import member_rows
from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.members.norm import MemberBatchNorm
from torch_uncertainty_signorm.signorm.conversion import find_norm_layers
from torch_uncertainty_signorm.signorm.layers import (
    SigmaGroupNorm,
    SigmaLayerNorm,
    SigmaRMSNorm,
    SigmaSyncBatchNorm,
)
from torch_uncertainty_signorm.signorm.registry import (
    NORM_REGISTRY,
    signorm_class_for,
)

M, C = 3, 4


def _plain(kind: type) -> nn.Module:
    """A trained-looking instance of the registered plain type ``kind``: random affine and,
    for BatchNorm, random running statistics."""
    if kind is nn.GroupNorm:
        layer = nn.GroupNorm(2, C)
    elif kind is timm_norm.GroupNorm:
        layer = kind(C, num_groups=2)
    else:
        layer = kind(C)  # timm's GroupNorm1 has one group
    with torch.no_grad():
        layer.weight.uniform_(-2, 2)
        if getattr(layer, "bias", None) is not None:
            layer.bias.normal_()
        if getattr(layer, "running_mean", None) is not None:
            layer.running_mean.normal_(), layer.running_var.uniform_(0.5, 2)
            layer.num_batches_tracked.fill_(7)
    return layer


def _inputs(kind: type, rows: int) -> torch.Tensor:
    """Batch-major inputs of the rank ``kind`` normalizes (channels last for LayerNorm/RMSNorm)."""
    if kind is nn.BatchNorm1d:
        return torch.randn(rows, C) * 2 + 1
    if kind is nn.BatchNorm3d:
        return torch.randn(rows, C, 2, 3, 3) * 2 + 1
    if issubclass(kind, (nn.modules.batchnorm._BatchNorm, nn.GroupNorm)) or "2d" in kind.__name__:
        return torch.randn(rows, C, 3, 3) * 2 + 1
    return torch.randn(rows, 3, C) * 2 + 1


@pytest.mark.parametrize("pretrained", [True, False], ids=["converted", "from-scratch"])
@pytest.mark.parametrize(
    "kind",
    list(NORM_REGISTRY),
    ids=lambda kind: f"{kind.__module__.split('.')[0]}.{kind.__qualname__}",
)
def test_every_member_folds_back_into_a_plain_layer_with_its_exact_output(kind, pretrained):
    """``to_plain(m)`` is the registered plain class that converts back into the same σNorm
    class, and computes member m's rows (training and evaluation), BN statistics included."""
    plain = _plain(kind)
    layer = signorm_class_for(plain).from_module(plain, M, pretrained=pretrained)
    with torch.no_grad():  # members differ: own scale logits and running statistics
        layer.scale_logits.add_(torch.randn_like(layer.scale_logits))
        if isinstance(layer, MemberBatchNorm):
            layer.running_mean.add_(torch.randn_like(layer.running_mean))
            layer.running_var.mul_(torch.rand_like(layer.running_var) + 0.5)
    folded = [layer.to_plain(m) for m in range(M)]
    assert all(NORM_REGISTRY[type(plain)] is type(layer) for plain in folded)
    if isinstance(layer, MemberBatchNorm):
        for m, plain in enumerate(folded):
            assert torch.equal(plain.running_mean, layer.running_mean[m])
            assert torch.equal(plain.running_var, layer.running_var[m])
            assert torch.equal(plain.num_batches_tracked, layer.num_batches_tracked)
    for training in (False, True):
        x = _inputs(kind, 4 * M)
        with torch.no_grad():
            out = member_rows(layer.train(training)(x), M)
            for m, (plain, x_m) in enumerate(zip(folded, member_rows(x, M), strict=True)):
                torch.testing.assert_close(plain.train(training)(x_m), out[m], rtol=1e-5, atol=1e-5)
    if isinstance(layer, MemberBatchNorm):  # one training step moved every member alike
        for m, plain in enumerate(folded):
            torch.testing.assert_close(plain.running_mean, layer.running_mean[m])
            torch.testing.assert_close(plain.running_var, layer.running_var[m])


#: TorchUncertainty's ``from_<layer>`` converters (as ``BatchLinear.from_linear``), by the torch
#: layer each takes.
CONVERTERS = {
    nn.BatchNorm1d: "from_batch_norm1d",
    nn.BatchNorm2d: "from_batch_norm2d",
    nn.BatchNorm3d: "from_batch_norm3d",
    nn.SyncBatchNorm: "from_sync_batch_norm",
    nn.LayerNorm: "from_layer_norm",
    nn.GroupNorm: "from_group_norm",
    nn.RMSNorm: "from_rms_norm",
    timm_norm.LayerNorm2d: "from_layer_norm2d",
}


@pytest.mark.parametrize("kind", list(CONVERTERS), ids=lambda kind: kind.__name__)
def test_from_layer_converters_are_the_registry_conversion(kind):
    """``SigmaBatchNorm2d.from_batch_norm2d(bn, M, pretrained=True)`` builds what the conversion
    walk builds for ``bn``: the same class and state."""
    plain, signorm_class = _plain(kind), NORM_REGISTRY[kind]
    layer = getattr(signorm_class, CONVERTERS[kind])(plain, M, pretrained=True)
    expected = signorm_class.from_module(plain, M, pretrained=True)
    assert type(layer) is signorm_class and layer.num_estimators == M
    for key, value in expected.state_dict().items():
        torch.testing.assert_close(layer.state_dict()[key], value)


def test_converters_refuse_a_layer_of_another_kind_naming_the_right_class():
    with pytest.raises(
        TypeError,
        match=r"SigmaSyncBatchNorm replaces SyncBatchNorm, got a LayerNorm: use SigmaLayerNorm\.",
    ):
        SigmaSyncBatchNorm.from_sync_batch_norm(nn.LayerNorm(C), M)
    with pytest.raises(
        TypeError,
        match=r"SigmaRMSNorm replaces RMSNorm or RmsNorm, got a LayerNorm: use SigmaLayerNorm",
    ):
        SigmaRMSNorm.from_layer_norm(nn.LayerNorm(C), M)  # inherited name, checked type
    with pytest.raises(TypeError, match=r"SigmaLayerNorm replaces LayerNorm, got a Linear\.$"):
        SigmaLayerNorm.from_module(nn.Linear(C, C), M)


def test_folding_checks_the_member_and_a_shift_the_plain_layer_cannot_hold():
    layer = SigmaRMSNorm(4, M)
    with pytest.raises(ValueError, match=r"member must be an integer in 0\.\.2, got 3"):
        layer.to_plain(3)
    layer.load_pretrained_affine(torch.ones(4), torch.full((4,), 0.5))
    with pytest.raises(
        ValueError,
        match=r"Member 1 of this SigmaRMSNorm has a nonzero shift β.*"
        r"RMSNorm cannot hold",
    ):
        layer.to_plain(1)


@pytest.mark.parametrize(
    "kind",
    [timm_norm.LayerNormFp32, timm_norm.LayerNorm2dFp32, timm_norm.RmsNormFp32],
    ids=lambda kind: kind.__name__,
)
def test_timm_float32_norms_keep_computing_in_float32(kind):
    """timm's ``*Fp32`` norms convert to σNorm classes of their own that normalize a bfloat16
    input in float32, as the plain layer does, instead of σLN/σRMSNorm in bfloat16."""
    plain = _plain(kind)
    layer = signorm_class_for(plain).from_module(plain, M, pretrained=True)
    assert type(layer) is not SigmaLayerNorm and type(layer).__name__.endswith("Fp32")
    x = _inputs(kind, 2 * M).bfloat16() * 8 + 100
    out = layer(x)
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, layer(x.float()).bfloat16())  # the float32 result, rounded once
    # Every member reproduces the pretrained layer (bfloat16 rounding of the output apart).
    for member, expected in zip(member_rows(out, M), member_rows(plain(x), M), strict=True):
        torch.testing.assert_close(member, expected, rtol=1e-2, atol=1e-2)
    assert type(layer.to_plain(0)) is kind


def test_timm_group_norms_convert_as_group_norm():
    """timm's GroupNorm and GroupNorm1 are torch's GroupNorm with another argument order: they
    convert (exact type) instead of being refused as unknown subclasses."""
    model = nn.Sequential(
        nn.Conv2d(3, C, 1), timm_norm.GroupNorm(C, num_groups=2), timm_norm.GroupNorm1(C)
    )
    assert find_norm_layers(model) == ["1", "2"]
    assert all(signorm_class_for(model[i]) is SigmaGroupNorm for i in (1, 2))


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
        folded = layer.to_plain(m).eval()
        assert type(folded) is nn.SyncBatchNorm
        torch.testing.assert_close(folded(x_m), out[m], rtol=1e-5, atol=1e-5)


def test_ensemble_with_sync_batch_norm_layers_gives_its_members():
    from fixtures.backbones import tiny_resnet

    backbone = nn.SyncBatchNorm.convert_sync_batchnorm(tiny_resnet())
    ensemble = signorm_ensemble(backbone, M).eval()
    x = torch.randn(2, 3, 32, 32)
    logits = ensemble(x).unflatten(0, (M, -1))
    member = ensemble.member_model(1).eval()
    assert any(type(module) is nn.SyncBatchNorm for module in member.modules())
    torch.testing.assert_close(member(x), logits[1], rtol=1e-4, atol=1e-5)
