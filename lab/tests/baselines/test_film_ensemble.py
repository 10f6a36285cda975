"""FiLM-Ensemble: per-member BatchNorm statistics and affine, diversity from the init gain."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from fixtures.backbones import randomize_norms, tiny_resnet, tiny_wideresnet
from fixtures.members import member_rows
from signorm_lab.baselines import FiLMBatchNorm, FiLMEnsemble, film_ensemble

M = 4


def _members(logits: torch.Tensor) -> torch.Tensor:
    return logits.unflatten(0, (M, -1))


@pytest.mark.parametrize("factory", [tiny_resnet, tiny_wideresnet], ids=["resnet", "wrn"])
def test_gain_zero_is_m_copies_of_the_backbone_in_train_and_eval(factory):
    plain = randomize_norms(factory())
    film = film_ensemble(copy.deepcopy(plain), M, gain=0.0)
    x = torch.randn(6, 3, 32, 32)
    plain.train(), film.train()
    expected, members = plain(x), _members(film(x))
    for member in members:  # batch statistics of each member's 6 rows = the plain batch's
        torch.testing.assert_close(member, expected, rtol=1e-4, atol=1e-5)
    plain.eval(), film.eval()
    expected, members = plain(x), _members(film(x))
    for member in members:  # running statistics updated identically by the training pass
        torch.testing.assert_close(member, expected, rtol=1e-4, atol=1e-5)


def test_members_differ_with_positive_gain_and_spread_scales_with_gain():
    plain = randomize_norms(tiny_resnet())
    film = film_ensemble(copy.deepcopy(plain), M, gain=1.0).eval()
    members = _members(film(torch.randn(5, 3, 32, 32)))
    for i in range(M):
        for j in range(i + 1, M):
            assert (members[i] - members[j]).abs().max() > 1e-3
    bn, layer = plain.bn1, film.backbone.bn1
    bound = math.sqrt(6.0 / (M + bn.num_features))
    deviation = layer.weight - bn.weight  # around the replaced layer's own affine
    assert deviation.abs().max() <= bound + 1e-6
    assert deviation.abs().max() > 0.5 * bound
    assert (layer.bias - bn.bias).abs().max() <= bound + 1e-6

    doubled = film_ensemble(copy.deepcopy(plain), M, gain=2.0)
    assert (doubled.backbone.bn1.weight - bn.weight).abs().max() > bound


def test_zero_center_draws_members_around_zero_as_the_official_code():
    film = film_ensemble(tiny_resnet(), M, gain=3.0, init_center="zero")
    layer = film.backbone.bn1
    bound = 3.0 * math.sqrt(6.0 / (M + layer.num_features))
    assert layer.weight.abs().max() <= bound + 1e-6
    assert abs(layer.weight.mean()) < 0.2 * bound  # centred on 0, not on BatchNorm's 1


def test_film_batch_norm_matches_one_batch_norm_per_member():
    layer = FiLMBatchNorm(3, M, momentum=None)
    layer.reset_members(gain=1.0)
    references = [nn.BatchNorm2d(3, momentum=None) for _ in range(M)]
    with torch.no_grad():
        for m, bn in enumerate(references):
            bn.weight.copy_(layer.weight[m]), bn.bias.copy_(layer.bias[m])
    for _ in range(2):  # cumulative running average over two batches
        x = torch.randn(M * 5, 3, 4, 4) * 3 + 1
        out = member_rows(layer(x), M)
        for m, bn in enumerate(references):
            torch.testing.assert_close(out[m], bn(member_rows(x, M)[m]))
    for m, bn in enumerate(references):
        torch.testing.assert_close(layer.running_mean[m], bn.running_mean)
        torch.testing.assert_close(layer.running_var[m], bn.running_var)
    layer.eval(), [bn.eval() for bn in references]
    x = torch.randn(M * 2, 3, 4, 4)
    out = member_rows(layer(x), M)
    for m, bn in enumerate(references):
        torch.testing.assert_close(out[m], bn(member_rows(x, M)[m]))


def test_members_survive_a_state_dict_round_trip():
    film = film_ensemble(tiny_resnet(), M, gain=1.0).eval()
    keys = film.state_dict().keys()
    assert {"backbone.bn1.weight", "backbone.bn1.running_mean"} <= set(keys)
    clone = film_ensemble(tiny_resnet(), M, gain=1.0).eval()
    clone.load_state_dict(film.state_dict())
    x = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(clone(x), film(x))


def test_every_parameter_trains_at_one_learning_rate():
    film = film_ensemble(tiny_resnet(), M, num_classes=7)
    assert film(torch.randn(2, 3, 32, 32)).shape == (M * 2, 7)
    assert all(p.requires_grad for p in film.parameters())
    assert not hasattr(film, "diversity_loss")  # no regularizer: diversity is the init's


def test_bad_inputs():
    with pytest.raises(ValueError, match="gain must be a finite number >= 0, got -1"):
        film_ensemble(tiny_resnet(), M, gain=-1)
    with pytest.raises(ValueError, match="init_center must be 'affine' or 'zero', got 'one'"):
        film_ensemble(tiny_resnet(), M, init_center="one")
    with pytest.raises(ValueError, match="num_estimators must be an integer >= 1, got 0"):
        film_ensemble(tiny_resnet(), 0)
    with pytest.raises(ValueError, match="num_classes must be an integer >= 1, got 0"):
        film_ensemble(tiny_resnet(), M, num_classes=0)
    with pytest.raises(ValueError, match="Sequential has no BatchNorm layer"):
        film_ensemble(nn.Sequential(nn.Linear(2, 2)), M)
    with pytest.raises(ValueError, match="expand_at='stem' is not a module of _ResNet"):
        FiLMEnsemble(tiny_resnet(), M, expand_at="stem")
    layer = FiLMBatchNorm(3, M)
    with pytest.raises(ValueError, match="num_estimators = 4, got 6 rows"):
        layer(torch.randn(6, 3, 2, 2))
    with pytest.raises(ValueError, match=r"expects \(B·M, 3, \.\.\.\) inputs, got shape \(8, 5\)"):
        layer(torch.randn(8, 5))


@pytest.mark.parametrize(
    ("plain", "shape"),
    [
        (nn.BatchNorm1d(3), (3,)),
        (nn.BatchNorm2d(3), (3, 4, 4)),
        (nn.BatchNorm3d(3), (3, 2, 2, 2)),
        (nn.SyncBatchNorm(3), (3, 4, 4)),
    ],
    ids=["1d", "2d", "3d", "sync"],
)
def test_a_member_folds_back_into_the_batch_norm_it_replaced(plain, shape):
    """``to_plain(m)``: member m's affine and running statistics in the replaced class, with
    member m's output in training and evaluation."""
    layer = FiLMBatchNorm.from_module(randomize_norms(plain), M, gain=1.0)
    layer.train()(torch.randn(M * 5, *shape) * 2 + 1)  # the members' statistics move apart
    folded = [layer.to_plain(m) for m in range(M)]
    for m, bn in enumerate(folded):
        assert type(bn) is type(plain)
        assert torch.equal(bn.weight, layer.weight[m]) and torch.equal(bn.bias, layer.bias[m])
        assert torch.equal(bn.running_mean, layer.running_mean[m])
        assert torch.equal(bn.running_var, layer.running_var[m])
    for training in (False, True):
        x = torch.randn(M * 4, *shape) * 3 - 1
        out = member_rows(layer.train(training)(x), M)
        for m, (bn, x_m) in enumerate(zip(folded, member_rows(x, M), strict=True)):
            torch.testing.assert_close(bn.train(training)(x_m), out[m], rtol=1e-5, atol=1e-5)
    assert type(FiLMBatchNorm(3, M).to_plain(0)) is nn.BatchNorm2d  # built directly
