"""The routine alone owns the learning-rate multipliers: any recipe is built on its groups."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch_uncertainty import optim_recipes as tu_recipes

from fixtures.backbones import tiny_resnet
from torch_uncertainty_signorm import optim_recipes, signorm_ensemble
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine
from torch_uncertainty_signorm.signorm.optim import signorm_param_groups


def _routine(**kwargs) -> SigmaNormClassificationRoutine:
    return SigmaNormClassificationRoutine(
        signorm_ensemble(tiny_resnet(), 2), 10, nn.CrossEntropyLoss(), **kwargs
    )


def _rates(procedure) -> list[float]:
    optimizer = procedure["optimizer"] if isinstance(procedure, dict) else procedure
    return [group["lr"] for group in optimizer.param_groups]


def _sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)


@pytest.mark.parametrize(
    "recipe",
    [optim_recipes.optim_cifar10_resnet18, tu_recipes.optim_cifar10_resnet18, _sgd],
    ids=["signorm_recipe", "torch_uncertainty_recipe", "plain_sgd"],
)
def test_a_python_optim_recipe_trains_at_the_routines_multipliers(recipe):
    """Scale logits at 7 × 4 and heads at 4 × the recipe's lr 0.1, as the routine's own
    optimizer_param_groups says, whichever recipe; the scheduler scales all."""
    routine = _routine(scale_lr_multiplier=7, member_lr_multiplier=4, optim_recipe=recipe)
    procedure = routine.configure_optimizers()
    assert _rates(procedure) == pytest.approx([0.1, 0.4, 2.8])
    assert _rates(procedure) == pytest.approx(
        [g.get("lr", 0.1) for g in routine.optimizer_param_groups(0.1)]
    )
    optimizer = procedure["optimizer"] if isinstance(procedure, dict) else procedure
    assert optimizer.param_groups[1]["weight_decay"] == pytest.approx(5e-4 / 4)
    if isinstance(procedure, dict):
        assert procedure["lr_scheduler"].base_lrs == pytest.approx([0.1, 0.4, 2.8])


def test_a_recipe_is_called_twice_to_read_its_rate_then_on_the_groups():
    calls = []

    def recipe(model):
        calls.append(type(model).__name__)
        return torch.optim.Adam(model.parameters(), lr=1e-3)

    routine = _routine(optim_recipe=recipe)
    assert calls == ["SigmaNormEnsemble", "_ParamGroups"]
    assert _rates(routine.configure_optimizers()) == pytest.approx([1e-3, 3e-3])  # Adam: 3×


def test_a_recipe_building_its_own_groups_is_refused_naming_it():
    def own_groups(model):
        return torch.optim.SGD(signorm_param_groups(model, lr=0.05), lr=0.05)

    with pytest.raises(
        ValueError,
        match=r"optim_recipe '.*own_groups' builds its optimizer on 2 parameter group\(s\) of "
        r"its own, holding (\d+) of the model's \1 parameters; σN-Ens builds the groups .*"
        r"model.parameters\(\)",
    ):
        _routine(optim_recipe=own_groups)


def test_a_built_optimizer_is_refused_naming_the_callable_to_give():
    model = signorm_ensemble(tiny_resnet(), 2)
    with pytest.raises(
        TypeError, match=r"optim_recipe is a built SGD, which cannot take the routine's"
    ):
        SigmaNormClassificationRoutine(model, 10, nn.CrossEntropyLoss(), optim_recipe=_sgd(model))
