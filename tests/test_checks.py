"""One argument check for every entry point: a boolean is never a count or a number."""

import pytest
import torch

from fixtures.backbones import tiny_resnet, tiny_vit
from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.baselines import film_ensemble, lora_ensemble
from torch_uncertainty_signorm.checks import check_fraction, check_integer, check_positive_number
from torch_uncertainty_signorm.optim import signorm_param_groups
from torch_uncertainty_signorm.prediction import member_probabilities
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine


def _resnet_ensemble(**kwargs):
    return signorm_ensemble(tiny_resnet(), kwargs.pop("num_estimators", 2), **kwargs)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: _resnet_ensemble(num_estimators=True), "num_estimators must be an integer >= 1"),
        (lambda: _resnet_ensemble(tau=True), "tau must be a finite number > 0, got True"),
        (lambda: _resnet_ensemble(diversity_strength=False),
         r"diversity_strength \(lambda\) must be a finite number >= 0, got False"),
        (lambda: _resnet_ensemble(num_classes=True), "num_classes must be an integer >= 1"),
        (lambda: signorm_param_groups(_resnet_ensemble(), lr=True),
         "lr must be a finite number > 0, got True"),
        (lambda: SigmaNormClassificationRoutine(_resnet_ensemble(), scale_lr_multiplier=True),
         "scale_lr_multiplier must be a finite number > 0, got True"),
        (lambda: film_ensemble(tiny_resnet(), 2, gain=True),
         "gain must be a finite number >= 0, got True"),
        (lambda: lora_ensemble(tiny_vit(), 2, rank=True), "rank must be an integer >= 1, got True"),
        (lambda: member_probabilities(torch.zeros(4, 3), True),
         "num_estimators must be an integer >= 1, got True"),
    ],
)
def test_booleans_are_refused_where_arguments_enter(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_checks_return_the_value_and_name_the_bound():
    assert check_integer("seed", 0, low=0) == 0
    assert check_positive_number("lr", 1) == 1.0
    assert isinstance(check_positive_number("lr", 1), float)
    assert check_fraction("val_split", 0.25) == 0.25
    with pytest.raises(ValueError, match=r"member must be an integer in 0\.\.3, got 4"):
        check_integer("member", 4, low=0, high=3)
    with pytest.raises(ValueError, match="lr must be a finite number > 0, got inf"):
        check_positive_number("lr", float("inf"))
    with pytest.raises(ValueError, match=r"threshold must be a number in \(0, 1\), got 1"):
        check_fraction("threshold", 1)
