"""One config object per method: SigmaNormConfig holds a σNorm-Ensemble's settings, read and
written by the wrapper and its factory (an export's config.json, and the baselines' FiLMConfig and
LoRAEnsembleConfig: the lab's lab/tests/test_config.py)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from fixtures.backbones import tiny_resnet
from fixtures.contracts import (
    SHARED_SETTINGS,
    check_config_fields,
    check_config_round_trip,
    check_shared_setting,
)
from torch_uncertainty_signorm import SigmaNormConfig, SigmaNormEnsemble, signorm_ensemble

FIELDS = [field.name for field in dataclasses.fields(SigmaNormConfig)]


#: Keyword arguments that are no setting: signorm_ensemble's deprecated ``checkpoint`` (a file to
#: read, which the lab's finetune_ensemble reads now), until 0.3.0.
DEPRECATED_KEYWORDS = frozenset({"checkpoint"})


@pytest.mark.parametrize("function", [SigmaNormEnsemble, signorm_ensemble])
def test_the_wrapper_and_the_factory_take_exactly_the_config_fields_with_its_defaults(function):
    check_config_fields(SigmaNormConfig, function, skip=DEPRECATED_KEYWORDS)


def test_the_ensemble_exposes_its_config_and_round_trips_it():
    check_config_round_trip(SigmaNormConfig, SigmaNormEnsemble, signorm_ensemble, tiny_resnet)


@pytest.mark.parametrize(("settings", "message"), SHARED_SETTINGS)
def test_the_config_checks_the_settings_all_wrappers_share_alike(settings, message):
    check_shared_setting(SigmaNormConfig, settings, message)


def test_the_wrapper_exposes_its_config_and_defaults_are_the_configs():
    model = SigmaNormEnsemble(tiny_resnet(), 2)
    assert model.config == SigmaNormConfig()
    model = signorm_ensemble(tiny_resnet(), 2, tau=0.5, regularized_layers=["bn2"])
    assert model.config == SigmaNormConfig(tau=0.5, regularized_layers=("bn2",))
    assert model.penalty.tau == 0.5


def test_a_config_builds_the_same_ensemble_as_the_keyword_arguments():
    config = SigmaNormConfig(
        tau=0.5,
        diversity_strength=0.1,
        head_norm="layer",
        regularized_layers="resnet18",
        eval_chunk_size=None,
    )
    torch.manual_seed(0)
    from_keywords = SigmaNormEnsemble(tiny_resnet(), 3, **config.to_dict())
    torch.manual_seed(0)
    from_config = SigmaNormEnsemble(tiny_resnet(), 3, config)
    assert from_config.config == from_keywords.config == config
    assert from_config.regularized_layer_names == from_keywords.regularized_layer_names
    for (name, a), (_, b) in zip(
        from_config.state_dict().items(), from_keywords.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name


def test_round_trip_through_a_dict_of_plain_data():
    config = SigmaNormConfig(
        num_classes=5,
        regularized_layers=["layer1.0.bn2", "bn1"],
        tau=1,
        member_spread=0.1,
        head="linear",
        expand_at="input",
        eval_chunk_size=64,
    )
    data = config.to_dict()
    assert list(data) == FIELDS
    assert json.loads(json.dumps(data)) == data
    assert data["regularized_layers"] == ["layer1.0.bn2", "bn1"]
    assert SigmaNormConfig.from_dict(json.loads(json.dumps(data))) == config
    assert SigmaNormConfig.from_dict({}) == SigmaNormConfig()


def test_a_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        SigmaNormConfig().tau = 0.5
    assert dataclasses.replace(SigmaNormConfig(), tau=0.5).tau == 0.5


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"tau": 0.0}, "tau must be a finite number > 0"),
        ({"tau": 1e4}, "tau=10000.0 is outside"),
        ({"diversity_strength": -1.0}, "diversity_strength (lambda) must be a finite number >= 0"),
        ({"diversity_strength": 1e4}, "is above"),
        ({"head_norm": "group"}, "head_norm must be 'auto', 'batch' or 'layer', got 'group'"),
        ({"eval_chunk_size": 0}, "eval_chunk_size must be 'auto', None or an integer >= 1"),
        ({"num_classes": 0}, "num_classes must be an integer >= 1"),
        ({"pretrained": "yes"}, "pretrained must be True or False"),
        ({"scale_init_std": -1.0}, "scale_init_std must be a finite number >= 0"),
        ({"member_spread": float("nan")}, "member_spread must be a finite number >= 0"),
        ({"regularized_layers": []}, "regularized_layers must be a preset name, a regex or a"),
        ({"expand_at": 3}, "expand_at must be 'auto', 'input' or a module name"),
    ],
)
def test_bad_values_give_the_wrappers_errors(settings, message):
    with pytest.raises(ValueError, match=None) as config_error:
        SigmaNormConfig(**settings)
    assert message in str(config_error.value)
    with pytest.raises(ValueError) as wrapper_error:
        SigmaNormEnsemble(tiny_resnet(), 2, **settings)
    assert str(wrapper_error.value) == str(config_error.value)


def test_unknown_keys_are_refused_naming_them_and_the_valid_ones():
    with pytest.raises(
        ValueError,
        match=r"no setting 'strength', 'temperature'; valid settings: "
        r"num_classes, pretrained,.*eval_chunk_size\.",
    ):
        SigmaNormConfig.from_dict({"tau": 0.5, "temperature": 1.0, "strength": 0.1})
    with pytest.raises(TypeError, match="needs a mapping"):
        SigmaNormConfig.from_dict(["tau"])


def test_a_config_and_a_conflicting_keyword_are_refused():
    config = SigmaNormConfig(tau=0.5)
    with pytest.raises(
        ValueError,
        match=r"Both config and keyword arguments set tau=0.2 "
        r"\(config: 0.5\)",
    ):
        SigmaNormEnsemble(tiny_resnet(), 2, config, tau=0.2)
    # Agreeing with the config, or left at the default, is no conflict.
    assert SigmaNormEnsemble(tiny_resnet(), 2, config, tau=0.5).config == config
    assert SigmaNormEnsemble(tiny_resnet(), 2, config, head_norm="auto").config == config
    # The config's dict is a config too.
    assert SigmaNormEnsemble(tiny_resnet(), 2, config.to_dict()).config == config
    with pytest.raises(TypeError, match="config must be a SigmaNormConfig"):
        SigmaNormEnsemble(tiny_resnet(), 2, "tau=0.5")
