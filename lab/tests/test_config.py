"""The baselines' config objects, FiLMConfig and LoRAEnsembleConfig, as SigmaNormConfig (the
method's tests/test_config.py), and an export's config.json: written from the wrapper's config,
read back into it."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from fixtures.backbones import randomize_norms, tiny_resnet, tiny_signorm_spec, tiny_vit
from fixtures.contracts import (
    SHARED_SETTINGS,
    check_config_fields,
    check_config_round_trip,
    check_shared_setting,
)
from signorm_lab.baselines import (
    FiLMConfig,
    FiLMEnsemble,
    LoRAEnsemble,
    LoRAEnsembleConfig,
    film_ensemble,
    lora_ensemble,
)
from signorm_lab.export import build_model, export_ensemble, load_ensemble
from torch_uncertainty_signorm import signorm_ensemble

BASELINES = {
    "film": (FiLMConfig, FiLMEnsemble, film_ensemble, tiny_resnet),
    "lora": (LoRAEnsembleConfig, LoRAEnsemble, lora_ensemble, tiny_vit),
}
WRAPPERS_AND_FACTORIES = [
    pytest.param(config, function, id=f"{baseline}-{function.__name__}")
    for baseline, (config, wrapper, factory, _) in BASELINES.items()
    for function in (wrapper, factory)
]


@pytest.mark.parametrize(("config_class", "function"), WRAPPERS_AND_FACTORIES)
def test_the_wrapper_and_the_factory_take_exactly_the_config_fields_with_its_defaults(
    config_class, function
):
    check_config_fields(config_class, function)


@pytest.mark.parametrize("baseline", BASELINES)
def test_every_baseline_exposes_its_config_and_round_trips_it(baseline):
    check_config_round_trip(*BASELINES[baseline])


@pytest.mark.parametrize("baseline", BASELINES)
@pytest.mark.parametrize(("settings", "message"), SHARED_SETTINGS)
def test_every_config_checks_the_settings_all_wrappers_share_alike(baseline, settings, message):
    check_shared_setting(BASELINES[baseline][0], settings, message)


@pytest.mark.parametrize(
    ("config_class", "settings", "message"),
    [
        (FiLMConfig, {"gain": -1.0}, "gain must be a finite number >= 0"),
        (FiLMConfig, {"init_center": "one"}, "init_center must be 'affine' or 'zero', got 'one'"),
        (LoRAEnsembleConfig, {"rank": 0}, "rank must be an integer >= 1"),
        (LoRAEnsembleConfig, {"alpha": 0.0}, "alpha must be a finite number > 0"),
        (LoRAEnsembleConfig, {"init_gain": -1.0}, "init_gain must be a finite number >= 0"),
        (LoRAEnsembleConfig, {"target_modules": []}, "target_modules must be a preset name, a"),
    ],
)
def test_bad_baseline_values_give_the_wrappers_errors(config_class, settings, message):
    with pytest.raises(ValueError) as error:
        config_class(**settings)
    assert message in str(error.value)


def test_lora_target_modules_are_kept_as_a_tuple_and_written_as_a_list():
    config = LoRAEnsembleConfig(target_modules=["qkv"])
    assert config.target_modules == ("qkv",)
    assert config.to_dict()["target_modules"] == ["qkv"]
    assert lora_ensemble(tiny_vit(), 2, target_modules=["qkv"]).config == config


def test_the_export_writes_the_config_and_loading_reads_it_back(tmp_path):
    spec = tiny_signorm_spec(3, style="cifar", tau=0.5)
    model = build_model(spec)
    assert model.config.tau == 0.5
    export_ensemble(model, spec, tmp_path)
    written = json.loads((tmp_path / "config.json").read_text())["model"]["init_args"]
    expected = {**model.config.to_dict(), "regularized_layers": model.regularized_layer_names}
    assert {key: written[key] for key in expected} == expected
    reloaded = load_ensemble(tmp_path)
    assert reloaded.config == dataclasses.replace(
        model.config, regularized_layers=tuple(model.regularized_layer_names)
    )


def test_a_converted_export_keeps_its_config(tmp_path):
    model = signorm_ensemble(randomize_norms(tiny_resnet()), 2, pretrained=True, tau=0.3)
    spec = tiny_signorm_spec(2, style="cifar", pretrained=True, tau=0.3)
    export_ensemble(model, spec, tmp_path)
    reloaded = load_ensemble(tmp_path)
    assert reloaded.config.pretrained and reloaded.config.tau == 0.3
    inputs = torch.randn(2, 3, 32, 32)
    assert torch.equal(reloaded(inputs), model.eval()(inputs))


def test_an_export_with_an_unknown_setting_is_refused(tmp_path):
    spec = tiny_signorm_spec(2, style="cifar")
    export_ensemble(build_model(spec), spec, tmp_path)
    path = tmp_path / "config.json"
    config = json.loads(path.read_text())
    config["model"]["init_args"]["temperature"] = 0.5
    path.write_text(json.dumps(config))
    with pytest.raises(
        ValueError,
        match=r"model\.init_args\.temperature=0\.5 is not an argument "
        r"of .*signorm_ensemble; valid arguments: model, ",
    ):
        load_ensemble(tmp_path)
