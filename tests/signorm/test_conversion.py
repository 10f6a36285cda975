"""The conversion walk: which norm layers it finds, and what counts as untrained weights."""

import pytest
import torch
from torch import nn

from fixtures.backbones import randomize_norms, tiny_bert, tiny_resnet, tiny_vit
from torch_uncertainty_signorm import find_norm_layers
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


def test_converted_models_are_not_converted_twice():
    model = tiny_resnet()
    convert_norm_layers(model, 2)
    with pytest.raises(
        ValueError,
        match=r"_ResNet is already converted to σNorm \(σNorm layers: "
        r"'bn1', 'layer1.0.bn1', 'layer1.0.bn2', \.\.\.\)",
    ):
        convert_norm_layers(model, 2)
