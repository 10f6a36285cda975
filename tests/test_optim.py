"""Optimizer groups of the σNorm scale logits."""

import pytest
import torch
from fixtures.backbones import tiny_resnet

from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.optim import signorm_param_groups


def test_scale_logits_get_their_own_faster_group_without_weight_decay():
    model = signorm_ensemble(tiny_resnet(), 2)
    base, scales = signorm_param_groups(model, lr=0.1, scale_lr_multiplier=50)
    assert scales["lr"] == pytest.approx(5.0) and scales["weight_decay"] == 0.0
    assert {id(p) for p in scales["params"]} == {id(p) for p in model.scale_logits()}
    grouped = [id(p) for p in [*base["params"], *scales["params"]]]
    assert sorted(grouped) == sorted(id(p) for p in model.parameters())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lr": True}, "lr must be a finite number > 0, got True"),
        ({"lr": 0.0}, "lr must be a finite number > 0, got 0.0"),
        ({"scale_lr_multiplier": True}, "scale_lr_multiplier must be .* > 0, got True"),
        ({"scale_lr_multiplier": float("inf")}, "scale_lr_multiplier must be .* > 0, got inf"),
    ],
)
def test_bad_rates_name_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        signorm_param_groups(signorm_ensemble(tiny_resnet(), 2), **{"lr": 0.1, **kwargs})


def test_a_module_without_signorm_layers_is_refused():
    with pytest.raises(ValueError, match="Linear holds no σNorm layer"):
        signorm_param_groups(torch.nn.Linear(2, 2), lr=0.1)
