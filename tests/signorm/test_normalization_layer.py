"""σNorm through the ``normalization_layer=`` of TorchUncertainty's builders: the backbone they
build, wrapped, is the ensemble that ``signorm_ensemble`` makes of the plain backbone."""

import pytest
import torch
from torch import nn

from fixtures.backbones import tiny_resnet, tiny_wideresnet
from torch_uncertainty_signorm import (
    SigmaGroupNorm,
    SigmaLayerNorm2d,
    signorm_ensemble,
    signorm_normalization_layer,
)

M, B = 4, 3
BUILDERS = {"resnet18": tiny_resnet, "wideresnet28": tiny_wideresnet}


@pytest.mark.parametrize("build", BUILDERS.values(), ids=BUILDERS)
def test_a_backbone_built_with_signorm_wraps_into_the_converted_ensemble(build):
    built = signorm_ensemble(build(normalization_layer=signorm_normalization_layer(M)), M)
    converted = signorm_ensemble(build(), M)
    assert built.signorm_layer_names == converted.signorm_layer_names
    assert built.regularized_layer_names == converted.regularized_layer_names
    assert {k: v.shape for k, v in built.state_dict().items()} == {
        k: v.shape for k, v in converted.state_dict().items()
    }
    assert [type(m) for m in built.modules()] == [type(m) for m in converted.modules()]
    converted.load_state_dict(built.state_dict())  # then both compute the same function
    x, labels = torch.randn(B, 3, 32, 32), torch.randint(0, 10, (B,))
    logits = built.eval()(x)
    torch.testing.assert_close(logits, converted.eval()(x), rtol=0, atol=0)
    assert logits.shape == (M * B, 10)
    for m, rows in enumerate(logits.view(M, B, 10)):  # member-major: member m's block
        torch.testing.assert_close(rows, built.member_model(m).eval()(x), rtol=1e-4, atol=1e-5)

    built.train()
    optimizer = torch.optim.SGD(built.parameters(), lr=0.1)
    before = built.backbone.bn1.scale_logits.detach().clone()
    loss = nn.functional.cross_entropy(built(x), labels.repeat(M)) + built.diversity_loss()
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss) and not torch.equal(built.backbone.bn1.scale_logits, before)


def test_the_built_layers_take_the_options_given():
    backbone = tiny_resnet(
        normalization_layer=signorm_normalization_layer(M, SigmaLayerNorm2d, eps=1e-3)
    )
    assert type(backbone.bn1) is SigmaLayerNorm2d
    assert (backbone.bn1.num_estimators, backbone.bn1.eps) == (M, 1e-3)
    assert signorm_ensemble(backbone, M).eval()(torch.randn(2, 3, 32, 32)).shape == (M * 2, 10)


def test_a_backbone_of_another_member_count_or_pretrained_is_refused():
    with pytest.raises(
        ValueError,
        match=r"_ResNet holds σNorm layers of another number of members than num_estimators=4: "
        r"'bn1' \(M = 3\), .*Build them with signorm_normalization_layer\(4\), or pass "
        r"num_estimators=3\.",
    ):
        signorm_ensemble(tiny_resnet(normalization_layer=signorm_normalization_layer(3)), M)
    with pytest.raises(ValueError, match=r"pretrained=True .*or pass pretrained=False\."):
        backbone = tiny_resnet(normalization_layer=signorm_normalization_layer(M))
        signorm_ensemble(backbone, M, pretrained=True)


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((0,), ValueError, r"num_estimators must be an integer >= 1, got 0\."),
        ((M, nn.BatchNorm2d), TypeError, r"layer must be a σNorm layer class .*BatchNorm2d"),
        ((M, SigmaGroupNorm), TypeError, r"functools\.partial\(SigmaGroupNorm, <num_groups>"),
    ],
)
def test_bad_factory_arguments_are_refused(args, error, message):
    with pytest.raises(error, match=message):
        signorm_normalization_layer(*args)


def test_an_option_the_layer_does_not_take_is_named():
    with pytest.raises(TypeError, match="scale_init"):
        signorm_normalization_layer(M, scale_init=0.5)
