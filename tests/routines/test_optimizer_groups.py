"""The routine's multipliers reach the optimizer whatever built it, or a conflict is refused."""

from __future__ import annotations

import pytest
import torch
from fixtures.backbones import tiny_resnet
from torch import nn
from torch_uncertainty import optim_recipes as tu_recipes

from torch_uncertainty_signorm import optim_recipes, signorm_ensemble
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine
from torch_uncertainty_signorm.signorm.optim import signorm_optim_recipe, signorm_param_groups


def _routine(**kwargs) -> SigmaNormClassificationRoutine:
    return SigmaNormClassificationRoutine(
        signorm_ensemble(tiny_resnet(), 2), 10, nn.CrossEntropyLoss(), **kwargs
    )


def _rates(procedure) -> list[float]:
    optimizer = procedure["optimizer"] if isinstance(procedure, dict) else procedure
    return [group["lr"] for group in optimizer.param_groups]


def _sgd(model, lr: float = 0.05):
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)


@pytest.mark.parametrize(
    "recipe",
    [optim_recipes.optim_cifar10_resnet18, tu_recipes.optim_cifar10_resnet18],
    ids=["signorm_recipe", "torch_uncertainty_recipe"],
)
def test_a_python_optim_recipe_trains_at_the_routines_multipliers(recipe):
    """The issue's call: scale logits at 7 × 4 and heads at 4 × the recipe's lr 0.1, as the
    routine's own optimizer_param_groups says, not 100× and 1×; the scheduler scales all."""
    routine = _routine(scale_lr_multiplier=7, member_lr_multiplier=4, optim_recipe=recipe)
    procedure = routine.configure_optimizers()
    assert _rates(procedure) == pytest.approx([0.1, 0.4, 2.8])
    assert _rates(procedure) == pytest.approx(
        [g.get("lr", 0.1) for g in routine.optimizer_param_groups(0.1)]
    )
    assert procedure["lr_scheduler"].base_lrs == pytest.approx([0.1, 0.4, 2.8])
    heads = procedure["optimizer"].param_groups[1]
    assert heads["weight_decay"] == pytest.approx(5e-4 / 4)


def test_signorm_optim_recipe_trains_at_the_routines_multipliers():
    routine = _routine(
        scale_lr_multiplier=7, member_lr_multiplier=4, optim_recipe=signorm_optim_recipe(_sgd)
    )
    assert _rates(routine.configure_optimizers()) == pytest.approx([0.05, 0.2, 1.4])


def test_a_multiplier_given_to_signorm_optim_recipe_applies_when_the_routine_has_none():
    routine = _routine(optim_recipe=signorm_optim_recipe(_sgd, scale_lr_multiplier=50))
    assert _rates(routine.configure_optimizers()) == pytest.approx([0.05, 2.5])


def test_two_different_scale_multipliers_are_refused_naming_both():
    with pytest.raises(
        ValueError,
        match=r"scale_lr_multiplier is given twice: 7 to the routine "
        r"and 50 to signorm_optim_recipe\(_sgd\)",
    ):
        _routine(scale_lr_multiplier=7, optim_recipe=signorm_optim_recipe(_sgd, 50))


def test_a_recipe_building_its_own_groups_is_kept_or_refused_when_it_disagrees():
    def own_groups(model):
        return torch.optim.SGD(signorm_param_groups(model, lr=0.05), lr=0.05)

    assert _rates(_routine(optim_recipe=own_groups).configure_optimizers()) == pytest.approx(
        [0.05, 5.0]
    )
    assert _rates(
        _routine(scale_lr_multiplier=100, optim_recipe=own_groups).configure_optimizers()
    ) == pytest.approx([0.05, 5.0])
    with pytest.raises(
        ValueError,
        match=r"scale_lr_multiplier=7.* \(scale logits at 7x the "
        r"learning rate\) and optim_recipe .*own_groups \(scale logits at 100x\) "
        r"disagree",
    ):
        _routine(scale_lr_multiplier=7, optim_recipe=own_groups)


def test_a_built_optimizer_dropping_given_multipliers_is_refused():
    model = signorm_ensemble(tiny_resnet(), 2)
    with pytest.raises(
        ValueError,
        match=r"member_lr_multiplier=4.0 would be dropped: the "
        r"optim_recipe's optimizer trains the σNorm scale logits in one group",
    ):
        SigmaNormClassificationRoutine(
            model, 10, nn.CrossEntropyLoss(), member_lr_multiplier=4, optim_recipe=_sgd(model)
        )
