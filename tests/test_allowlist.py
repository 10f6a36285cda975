"""The allow-list of class paths a file may make jsonargparse import."""

from pathlib import Path

import pytest
import yaml
from fixtures.marker_module import assert_not_imported, marker_module

from torch_uncertainty_signorm import SigmaNormEnsemble
from torch_uncertainty_signorm.allowlist import MODEL_CLASS_PATHS, check_spec, instantiate_spec

EXPERIMENTS = Path(__file__).parents[1] / "experiments"
SIGNORM_RECIPES = [p for p in sorted(EXPERIMENTS.glob("*.yaml"))
                   if "SigmaNormClassificationRoutine" in p.read_text()]


@pytest.mark.parametrize("recipe", SIGNORM_RECIPES, ids=lambda p: p.stem)
def test_signorm_recipes_name_only_allowed_classes(recipe):
    """Their checkpoints' routine blocks can be rebuilt by load_from_checkpoint."""
    routine = yaml.safe_load(recipe.read_text())["routine"]["init_args"]
    check_spec(routine, where="routine")
    assert routine["model"]["class_path"] in MODEL_CLASS_PATHS


def test_names_outside_the_list_are_refused_before_import(tmp_path, monkeypatch):
    name, marker = marker_module(tmp_path, monkeypatch, "allowlist_marker")
    spec = {"class_path": "torch_uncertainty_signorm.signorm_ensemble",
            "init_args": {"model": {"class_path": "torch_uncertainty.models.classification.resnet",
                                    "init_args": {"normalization_layer": f"{name}.Evil"}}}}
    with pytest.raises(ValueError, match=rf"model.init_args.model.init_args.normalization_layer="
                                         rf"'{name}.Evil' is not an allowed class path.*allowed: "):
        instantiate_spec(spec, SigmaNormEnsemble)
    with pytest.raises(ValueError, match=rf"losses\[1\].class_path='{name}.Evil'"):
        check_spec([{"class_path": "torch.nn.CrossEntropyLoss"}, {"class_path": f"{name}.Evil"}],
                   where="losses")
    assert_not_imported(name, marker)
    check_spec({"regularized_layers": ["layer1.0.bn2", "encoder.layer"], "expand_at": "blocks"})


def test_allowed_spec_builds_the_ensemble():
    model = instantiate_spec({
        "class_path": "torch_uncertainty_signorm.signorm_ensemble",
        "init_args": {"model": {"class_path": "torch_uncertainty.models.classification.resnet",
                                "init_args": {"in_channels": 3, "num_classes": 4, "arch": 18,
                                              "width_multiplier": 0.125}},
                      "num_estimators": 3}}, SigmaNormEnsemble)
    assert isinstance(model, SigmaNormEnsemble)
    assert model.num_estimators == 3 and model.heads.weight.shape[:2] == (3, 4)
