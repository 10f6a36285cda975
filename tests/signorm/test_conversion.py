"""The conversion walk: which norm layers it finds, and what counts as untrained weights."""

import pytest
import torch
from torch import nn

from fixtures.backbones import randomize_norms, tiny_bert, tiny_resnet, tiny_vit
from torch_uncertainty_signorm import SigmaBatchNorm2d, find_norm_layers, signorm_ensemble
from torch_uncertainty_signorm.signorm.conversion import convert_norm_layers, norms_at_initial_state


def _at_initial_state(model: nn.Module) -> bool:
    return norms_at_initial_state(model.state_dict(), find_norm_layers(model))


@pytest.mark.parametrize("make", [tiny_resnet, tiny_vit, tiny_bert])
def test_fresh_backbones_are_untrained_and_pretrained_like_ones_are_not(make):
    assert _at_initial_state(make())
    assert not _at_initial_state(randomize_norms(make()))


def test_one_moved_value_or_statistic_is_enough_evidence_of_training():
    model = tiny_resnet()
    with torch.no_grad():
        model.layer4[1].bn2.bias[3] = 0.25
    assert not _at_initial_state(model)
    model = tiny_resnet()
    model.layer1[0].bn1.num_batches_tracked += 1
    assert not _at_initial_state(model)


def test_norm_layers_without_state_carry_no_evidence():
    stateless = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4, elementwise_affine=False))
    assert not _at_initial_state(stateless)


def test_signorm_layers_in_the_backbone_are_kept_when_they_hold_its_members():
    """σNorm layers built into a backbone (``normalization_layer=``) stay as they are beside the
    plain norms converted around them; no other member count, and no pretrained conversion."""
    kept = SigmaBatchNorm2d(4, 2)
    model = nn.Sequential(nn.Conv2d(3, 4, 1), kept, nn.Conv2d(4, 4, 1), nn.BatchNorm2d(4))
    assert not norms_at_initial_state(model.state_dict(), ["1"])  # σNorm: no evidence
    layers = convert_norm_layers(model, 2)
    assert list(layers) == ["1", "3"] and layers["1"] is kept is model[1]
    assert type(model[3]) is SigmaBatchNorm2d and layers["3"] is model[3]
    assert convert_norm_layers(model, 2) == layers  # converting again changes nothing
    with pytest.raises(
        ValueError,
        match=r"Sequential holds σNorm layers of another number of members than "
        r"num_estimators=3: '1' \(M = 2\), '3' \(M = 2\)\. Build them with "
        r"signorm_normalization_layer\(3\), or pass num_estimators=2\.",
    ):
        convert_norm_layers(model, 3)
    with pytest.raises(
        ValueError, match=r"pretrained=True .* already holds σNorm layers \(first: '1'\)"
    ):
        convert_norm_layers(model, 2, pretrained=True)


def test_an_ensemble_is_not_wrapped_again():
    with pytest.raises(
        ValueError,
        match=r"SigmaNormEnsemble is already an ensemble \(SigmaNormEnsemble of 2 members\): "
        r"pass the original backbone",
    ):
        find_norm_layers(signorm_ensemble(tiny_resnet(), 2))
