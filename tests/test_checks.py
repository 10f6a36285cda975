"""One argument check for every entry point: a boolean is never a count or a number."""

import pytest
import torch

from fixtures.backbones import tiny_resnet
from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.evaluation.prediction import member_probabilities
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine
from torch_uncertainty_signorm.signorm.optim import signorm_param_groups
from torch_uncertainty_signorm.utils.checks import (
    check_choices,
    check_fraction,
    check_integer,
    check_positive_number,
    check_stage,
)


def _resnet_ensemble(**kwargs):
    return signorm_ensemble(tiny_resnet(), kwargs.pop("num_estimators", 2), **kwargs)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: _resnet_ensemble(num_estimators=True), "num_estimators must be an integer >= 1"),
        (lambda: _resnet_ensemble(tau=True), "tau must be a finite number > 0, got True"),
        (
            lambda: _resnet_ensemble(diversity_strength=False),
            r"diversity_strength \(lambda\) must be a finite number >= 0, got False",
        ),
        (lambda: _resnet_ensemble(num_classes=True), "num_classes must be an integer >= 1"),
        (
            lambda: signorm_param_groups(_resnet_ensemble(), lr=True),
            "lr must be a finite number > 0, got True",
        ),
        (
            lambda: SigmaNormClassificationRoutine(_resnet_ensemble(), scale_lr_multiplier=True),
            "scale_lr_multiplier must be a finite number > 0, got True",
        ),
        (
            lambda: member_probabilities(torch.zeros(4, 3), True),
            "num_estimators must be an integer >= 1, got True",
        ),
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


@pytest.mark.parametrize(
    ("values", "named"),
    [
        (["fog", "fgo", "snow"], r"\['fgo'\]"),  # unknown: only the bad name
        (["fog", "fog"], r"\['fog', 'fog'\]"),  # repeated: the values as given
        ([], r"\[\]"),  # missing
        ("fgo", r"\['fgo'\]"),  # one name, not its letters
    ],
)
def test_check_choices_names_the_bad_values_and_the_valid_ones(values, named):
    message = rf"Unknown, missing or repeated corruptions {named}; valid names: \['fog', 'snow'\]\."
    with pytest.raises(ValueError, match=message):
        check_choices("corruptions", values, ("fog", "snow"))


def test_check_choices_returns_the_names_in_the_given_order():
    assert check_choices("corruptions", "snow", {"fog": 0.1, "snow": 0.2}) == ("snow",)
    assert check_choices("corruptions", iter(["snow", "fog"]), ["fog", "snow"]) == ("snow", "fog")


def test_setup_stages_are_fit_validate_test_or_all():
    for stage in ("fit", "validate", "test", None):
        check_stage(stage)
    with pytest.raises(ValueError, match=r"Stage 'predict' is not supported; use 'fit', "):
        check_stage("predict")
