"""Multi-head ensemble: one backbone pass shared by M fresh linear heads."""

from __future__ import annotations

import copy
import inspect
import json

import pytest
import torch
from torch import nn

from fixtures.backbones import tiny_resnet
from signorm_lab.baselines import (
    MultiHeadConfig,
    MultiHeadEnsemble,
    multi_head_ensemble,
)
from signorm_lab.evaluation.parameter_counts import parameter_counts

M = 4


def test_the_backbone_runs_once_on_the_batch_and_each_member_is_its_head_on_it():
    plain = tiny_resnet().eval()
    ensemble = multi_head_ensemble(copy.deepcopy(plain), M).eval()
    rows = []
    ensemble.backbone.register_forward_hook(lambda module, args, out: rows.append(args[0].shape))
    x = torch.randn(5, 3, 32, 32)
    with torch.no_grad():
        logits = ensemble(x).unflatten(0, (M, -1))
        plain.linear = nn.Identity()
        features = plain(x)
    assert rows == [x.shape]  # one pass, B rows (no member expansion)
    for m in range(M):
        head = ensemble.heads.to_plain(m)
        torch.testing.assert_close(logits[m], head(features), rtol=1e-5, atol=1e-5)
    assert (logits[0] - logits[1]).abs().max() > 1e-3  # fresh heads differ


def test_each_head_learns_from_its_own_rows_and_the_backbone_from_all():
    ensemble = multi_head_ensemble(tiny_resnet(), M)
    logits = ensemble(torch.randn(6, 3, 32, 32)).unflatten(0, (M, -1))
    nn.functional.cross_entropy(logits[1], torch.randint(0, 10, (6,))).backward()
    grads = ensemble.heads.weight.grad.flatten(1).abs().sum(1)
    assert grads[1] > 0 and torch.all(grads[[0, 2, 3]] == 0)
    assert all(p.grad is not None for p in ensemble.backbone.parameters() if p.requires_grad)


def test_parameters_are_the_backbone_without_its_classifier_plus_m_heads():
    plain = tiny_resnet(num_classes=10)
    total = sum(p.numel() for p in plain.parameters())
    features = plain.linear.in_features
    classifier = plain.linear.weight.numel() + plain.linear.bias.numel()
    ensemble = multi_head_ensemble(plain, M, num_classes=7)
    expected = total - classifier + M * 7 * (features + 1)
    assert parameter_counts(ensemble) == {"trainable": expected, "total": expected}


def test_the_wrapper_and_factory_take_the_config_fields_and_round_trip_it():
    for function in (MultiHeadEnsemble, multi_head_ensemble):
        keywords = {
            p.name: p.default
            for p in inspect.signature(function).parameters.values()
            if p.kind is inspect.Parameter.KEYWORD_ONLY
        }
        assert keywords == MultiHeadConfig.defaults()
    config = MultiHeadConfig(num_classes=7, head="linear")
    assert MultiHeadConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert multi_head_ensemble(tiny_resnet(), 2, config).config == config


def test_bad_settings_name_the_value_and_what_is_valid():
    with pytest.raises(ValueError, match="num_classes must be an integer >= 1, got 0"):
        multi_head_ensemble(tiny_resnet(), M, num_classes=0)
    with pytest.raises(ValueError, match="num_estimators must be an integer >= 1, got 0"):
        multi_head_ensemble(tiny_resnet(), 0)
    with pytest.raises(ValueError, match=r"head='fc2' is not an nn\.Linear submodule"):
        multi_head_ensemble(tiny_resnet(), M, head="fc2")
    with pytest.raises(ValueError, match="MultiHeadConfig has no setting 'expand_at'"):
        MultiHeadConfig.from_dict({"expand_at": "input"})
    with pytest.raises(ValueError, match=r"Both config and keyword arguments set num_classes=3"):
        multi_head_ensemble(tiny_resnet(), M, MultiHeadConfig(num_classes=7), num_classes=3)
