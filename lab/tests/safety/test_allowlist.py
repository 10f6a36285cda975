"""The allow-list of class paths a file may make jsonargparse import."""

from pathlib import Path

import pytest

from fixtures.marker_module import assert_not_imported, marker_module
from signorm_lab.cli.recipe_bases import composed_recipe
from signorm_lab.safety.allowlist import MODEL_CLASS_PATHS, check_class_paths
from signorm_lab.safety.class_blocks import build_class_block
from torch_uncertainty_signorm import SigmaNormEnsemble

EXPERIMENTS = Path(__file__).parents[3] / "experiments"
SIGNORM_RECIPES = [
    p
    for p in sorted(EXPERIMENTS.glob("*.yaml"))
    if "SigmaNormClassificationRoutine" in p.read_text()
]


@pytest.mark.parametrize("recipe", SIGNORM_RECIPES, ids=lambda p: p.stem)
def test_signorm_recipes_name_only_allowed_classes(recipe):
    """Their checkpoints' routine blocks can be rebuilt by load_routine."""
    routine = composed_recipe(recipe)["routine"]["init_args"]
    check_class_paths(routine, where="routine")
    assert routine["model"]["class_path"] in MODEL_CLASS_PATHS


def test_names_outside_the_list_are_refused_before_import(tmp_path, monkeypatch):
    name, marker = marker_module(tmp_path, monkeypatch, "allowlist_marker")
    spec = {
        "class_path": "torch_uncertainty_signorm.signorm_ensemble",
        "init_args": {
            "model": {
                "class_path": "torch_uncertainty.models.classification.resnet",
                "init_args": {"normalization_layer": f"{name}.Evil"},
            }
        },
    }
    with pytest.raises(
        ValueError,
        match=rf"model.init_args.model.init_args.normalization_layer="
        rf"'{name}.Evil' is not an allowed class path.*allowed: ",
    ):
        build_class_block(spec, SigmaNormEnsemble)
    with pytest.raises(ValueError, match=rf"losses\[1\].class_path='{name}.Evil'"):
        check_class_paths(
            [{"class_path": "torch.nn.CrossEntropyLoss"}, {"class_path": f"{name}.Evil"}],
            where="losses",
        )
    assert_not_imported(name, marker)
    check_class_paths(
        {"regularized_layers": ["layer1.0.bn2", "encoder.layer"], "expand_at": "blocks"}
    )


def test_allowed_spec_builds_the_ensemble():
    model = build_class_block(
        {
            "class_path": "torch_uncertainty_signorm.signorm_ensemble",
            "init_args": {
                "model": {
                    "class_path": "torch_uncertainty.models.classification.resnet",
                    "init_args": {
                        "in_channels": 3,
                        "num_classes": 4,
                        "arch": 18,
                        "width_multiplier": 0.125,
                    },
                },
                "num_estimators": 3,
            },
        },
        SigmaNormEnsemble,
    )
    assert isinstance(model, SigmaNormEnsemble)
    assert model.num_estimators == 3 and model.heads.weight.shape[:2] == (3, 4)


def test_settings_given_as_one_config_block_build_the_same_ensemble():
    """A checkpoint of a recipe giving the settings as a ``config:`` block stores
    ``SigmaNormConfig``'s class path: it is allowed, and builds what the keywords build."""
    backbone = {
        "class_path": "torch_uncertainty.models.classification.resnet",
        "init_args": {"in_channels": 3, "num_classes": 4, "arch": 18, "width_multiplier": 0.125},
    }
    settings = {"tau": 0.5, "regularized_layers": "resnet18", "member_spread": 0.2}
    as_keywords = build_class_block(
        {
            **_ensemble_spec(backbone),
            "init_args": {"model": backbone, "num_estimators": 2, **settings},
        },
        SigmaNormEnsemble,
    )
    as_config = build_class_block(
        {
            **_ensemble_spec(backbone),
            "init_args": {
                "model": backbone,
                "num_estimators": 2,
                "config": {
                    "class_path": "torch_uncertainty_signorm.SigmaNormConfig",
                    "init_args": settings,
                },
            },
        },
        SigmaNormEnsemble,
    )
    assert as_config.config == as_keywords.config and as_config.config.tau == 0.5
    assert as_config.regularized_layer_names == as_keywords.regularized_layer_names


def _ensemble_spec(backbone) -> dict:
    return {
        "class_path": "torch_uncertainty_signorm.signorm_ensemble",
        "init_args": {"model": backbone, "num_estimators": 2},
    }


@pytest.mark.parametrize("as_string", ["yaml", "yaml_file", "class_name"])
def test_a_string_read_as_a_class_is_refused_before_parsing(as_string, tmp_path, monkeypatch):
    """jsonargparse reads a string given for a class-typed argument as a class block (YAML, a
    YAML file, a class name): it is refused before anything is imported or built."""
    name, marker = marker_module(tmp_path, monkeypatch, "string_class_marker")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "block.yaml").write_text(f"class_path: {name}.Evil\n")
    value = {
        "yaml": f"{{class_path: {name}.Evil}}",
        "yaml_file": "block.yaml",
        "class_name": "Linear",
    }[as_string]
    with pytest.raises(
        ValueError,
        match=rf"model\.init_args\.model={value!r} is a string where "
        rf"a class is expected",
    ):
        build_class_block(_ensemble_spec(value), SigmaNormEnsemble)
    assert_not_imported(name, marker)


def test_strings_that_are_data_are_kept():
    """Plain strings of arguments that take strings (a preset, a regex, a style) build as
    before; only strings read as classes are refused."""
    from fixtures.backbones import tiny_signorm_spec

    spec = tiny_signorm_spec(2, regularized_layers=r"(.*\.)?layer\d+\.\d+\.bn2")
    model = build_class_block(spec, SigmaNormEnsemble)
    assert model.regularized_layer_names[0].endswith("layer1.0.bn2")
