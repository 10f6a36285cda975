"""Optimizer groups of the σNorm scale logits."""

import pytest
import torch

from fixtures.backbones import tiny_resnet
from torch_uncertainty_signorm import optim_recipes, signorm_ensemble
from torch_uncertainty_signorm.signorm.optim import signorm_optim_recipe, signorm_param_groups


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


def test_signorm_recipes_are_torch_uncertaintys_with_the_scale_logits_apart():
    from torch_uncertainty import optim_recipes as tu

    model = signorm_ensemble(tiny_resnet(), 2)
    theirs, ours = tu.optim_cifar10_resnet18(model), optim_recipes.optim_cifar10_resnet18(model)
    assert type(ours["optimizer"]) is type(theirs["optimizer"])
    assert type(ours["lr_scheduler"]) is type(theirs["lr_scheduler"])
    (reference,) = theirs["optimizer"].param_groups
    base, scales = ours["optimizer"].param_groups
    assert {k: v for k, v in base.items() if k != "params"} == {
        k: v for k, v in reference.items() if k != "params"
    }  # lr 0.1, momentum, nesterov, wd
    assert scales["lr"] == pytest.approx(100 * reference["lr"]) and scales["weight_decay"] == 0
    assert {id(p) for p in scales["params"]} == {id(p) for p in model.scale_logits()}
    assert ours["lr_scheduler"].optimizer is ours["optimizer"]
    for _ in range(25):  # MultiStepLR milestone 25: both groups decay by 10
        ours["optimizer"].step()
        ours["lr_scheduler"].step()
    assert [g["lr"] for g in ours["optimizer"].param_groups] == pytest.approx([0.01, 1.0])
    # Every recipe of TorchUncertainty has its σN-Ens version, under the same name.
    assert {name for name in dir(tu) if name.startswith("optim_")} == {
        name for name in optim_recipes.__all__ if name.startswith("optim_")
    }
    procedure = optim_recipes.get_procedure("wideresnet28x10", "cifar100")(model)
    assert procedure["optimizer"].param_groups[1]["lr"] == pytest.approx(10.0)


def test_bad_recipes_name_the_problem():
    with pytest.raises(TypeError, match=r"optim_recipe must be a callable.*got SGD"):
        signorm_optim_recipe(torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1))
    with pytest.raises(TypeError, match="returned NoneType; expected a torch optimizer"):
        signorm_optim_recipe(lambda m: None)(signorm_ensemble(tiny_resnet(), 2))


@pytest.mark.parametrize(
    "call",
    [
        lambda recipe: signorm_optim_recipe(recipe, scale_lr_multiplier=50),
        lambda recipe: signorm_optim_recipe(recipe, 50),  # 0.1.0's positional form
        lambda recipe: optim_recipes.get_procedure("resnet18", "cifar10", scale_lr_multiplier=50),
        lambda recipe: optim_recipes.get_procedure("resnet18", "cifar10", None, 50),
    ],
    ids=["signorm_optim_recipe", "signorm_optim_recipe-positional", "get_procedure", "positional"],
)
def test_a_recipe_takes_no_multiplier_and_says_the_routine_owns_it(call):
    with pytest.raises(
        TypeError,
        match=r"takes no scale_lr_multiplier: the routine owns it since 0\.2\.0: "
        r"SigmaNormClassificationRoutine\(\.\.\., scale_lr_multiplier=\.\.\.\)",
    ):
        call(lambda m: torch.optim.SGD(m.parameters(), lr=0.1))


def test_member_parameters_train_m_times_faster_with_weight_decay_divided_by_m():
    model = signorm_ensemble(tiny_resnet(), 4)
    shared, heads, scales = signorm_param_groups(
        model, lr=0.1, scale_lr_multiplier=100, member_lr_multiplier=4, weight_decay=1e-3
    )
    assert heads["lr"] == pytest.approx(0.4) and heads["weight_decay"] == pytest.approx(2.5e-4)
    assert scales["lr"] == pytest.approx(40.0) and scales["weight_decay"] == 0.0
    assert {id(p) for p in heads["params"]} == {id(p) for p in model.heads.parameters()}
    assert len(heads["params"]) == 4  # the linear layers' weight and bias, the norm's affine
    assert "lr" not in shared  # the optimizer's own rate
    grouped = [id(p) for g in (shared, heads, scales) for p in g["params"]]
    assert sorted(grouped) == sorted(id(p) for p in model.parameters())


def test_a_member_step_at_multiplier_m_equals_a_single_model_step():
    """Each member's head gets 1/M of its own loss gradient; lr x M and wd / M undo that."""
    torch.manual_seed(0)
    model = signorm_ensemble(tiny_resnet(), 2)
    groups = signorm_param_groups(model, lr=0.1, member_lr_multiplier=2, weight_decay=0.01)
    optimizer = torch.optim.SGD(groups, lr=0.1, weight_decay=0.01)
    before = model.heads.weight.detach().clone()
    model.heads.weight.grad = torch.ones_like(before) / 2  # the 1/M share of a gradient of 1
    optimizer.step()
    expected = before - 0.1 * (1.0 + 0.01 * before)  # a single model: lr 0.1, wd 0.01
    torch.testing.assert_close(model.heads.weight.detach(), expected)


def test_a_bad_member_multiplier_names_the_value():
    with pytest.raises(ValueError, match=r"member_lr_multiplier must be .* > 0, got 0"):
        signorm_param_groups(signorm_ensemble(tiny_resnet(), 2), lr=0.1, member_lr_multiplier=0)


def test_the_default_scale_rate_follows_the_optimisers_kind():
    """100× makes up for SGD's small scale-logit gradients; Adam already steps every parameter by
    about its rate, so there the default is lower (docs/reliability.md)."""
    from torch_uncertainty_signorm.signorm.optim import (
        ADAPTIVE_SCALE_LR_MULTIPLIER as ADAPTIVE,
    )
    from torch_uncertainty_signorm.signorm.optim import is_adaptive

    assert ADAPTIVE < 100.0
    model = signorm_ensemble(tiny_resnet(), 2)
    for make, rate in (
        (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), 100.0),
        (lambda p: torch.optim.Adam(p, lr=0.1), ADAPTIVE),
        (lambda p: torch.optim.AdamW(p, lr=0.1), ADAPTIVE),
        (lambda p: torch.optim.RMSprop(p, lr=0.1), ADAPTIVE),
    ):
        optimizer = signorm_optim_recipe(lambda m, make=make: make(m.parameters()))(model)
        assert optimizer.param_groups[-1]["lr"] == pytest.approx(0.1 * rate)
        assert is_adaptive(optimizer) == (rate == ADAPTIVE)
