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


def test_member_parameters_train_m_times_faster_with_weight_decay_divided_by_m():
    model = signorm_ensemble(tiny_resnet(), 4)
    shared, heads, scales = signorm_param_groups(
        model, lr=0.1, scale_lr_multiplier=100, member_lr_multiplier=4, weight_decay=1e-3
    )
    assert heads["lr"] == pytest.approx(0.4) and heads["weight_decay"] == pytest.approx(2.5e-4)
    assert scales["lr"] == pytest.approx(40.0) and scales["weight_decay"] == 0.0
    assert {id(p) for p in heads["params"]} == {id(model.heads.weight), id(model.heads.bias)}
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
    with pytest.raises(ValueError, match="member_lr_multiplier must be .* > 0, got 0"):
        signorm_param_groups(signorm_ensemble(tiny_resnet(), 2), lr=0.1, member_lr_multiplier=0)
