"""The lab's argument checks: the baselines refuse a boolean where a number goes, and the eval
sets exclude TorchUncertainty's single-set loaders (the shared checks: the method's
tests/test_checks.py)."""

import pytest

from fixtures.backbones import tiny_resnet, tiny_vit
from signorm_lab.baselines import film_ensemble, lora_ensemble
from signorm_lab.evaluation.eval_sets import check_eval_flags


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: film_ensemble(tiny_resnet(), 2, gain=True),
            "gain must be a finite number >= 0, got True",
        ),
        (lambda: lora_ensemble(tiny_vit(), 2, rank=True), "rank must be an integer >= 1, got True"),
    ],
    ids=["film-gain", "lora-rank"],
)
def test_booleans_are_refused_where_the_baselines_arguments_enter(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_single_set_loaders_and_eval_sets_loaders_exclude_each_other():
    check_eval_flags(False, False, eval_ood=True, eval_shift=True)
    check_eval_flags(True, True, eval_ood=False, eval_shift=False)
    message = (
        r"eval_ood=False / eval_shift=True \(TorchUncertainty's single-set loaders.*"
        r"cannot be combined with eval_near_far_ood=False / eval_shift_severities=True"
    )
    with pytest.raises(ValueError, match=message):
        check_eval_flags(False, True, eval_ood=False, eval_shift=True)
