"""The registry of models an export or a checkpoint may name, and the views read from it."""

import enum
from pathlib import Path

import pytest

from fixtures.imports import modules_imported_by
from signorm_lab.export import EXPORTABLE_CLASS_PATHS
from signorm_lab.safety import allowlist, model_registry
from signorm_lab.safety.allowlist import import_object
from signorm_lab.safety.plain_data import is_data, with_plain_values


def test_every_registered_path_names_an_importable_model():
    for entry in model_registry.model_entries():
        objects = {id(import_object(path)) for path in entry.class_paths}
        assert len(objects) == 1, entry.class_paths  # aliases name the same object


def test_the_allow_list_and_the_exportable_models_are_views_of_the_registry():
    assert model_registry.class_paths(allow_listed=True) == allowlist.MODEL_CLASS_PATHS
    assert model_registry.class_paths(exportable=True) == EXPORTABLE_CLASS_PATHS
    assert allowlist.MODEL_CLASS_PATHS <= EXPORTABLE_CLASS_PATHS
    assert "torchvision.models.resnet18" in EXPORTABLE_CLASS_PATHS - allowlist.MODEL_CLASS_PATHS
    baselines = model_registry.class_paths(role="baseline")
    assert "signorm_lab.baselines.film_ensemble" in baselines
    assert not baselines & (allowlist.MODEL_CLASS_PATHS | EXPORTABLE_CLASS_PATHS)


def test_the_registry_records_what_fetches_weights():
    bert = model_registry.model_entry("signorm_lab.models.backbones.bert_classifier")
    assert bert.weight_sources == {"pretrained": False, "pretrained_path": None}
    assert bert.stored_argument.name == "config"
    ensemble = model_registry.model_entry(
        "torch_uncertainty_signorm.signorm.ensemble.signorm_ensemble"
    )
    assert ensemble.role == "ensemble" and ensemble.layout_flags == ("pretrained",)
    assert "checkpoint" in ensemble.weight_sources
    assert model_registry.model_entry("os.system") is None
    with pytest.raises(TypeError):
        bert.weight_sources["pretrained"] = True  # read-only


def test_one_rule_for_data():
    class Style(enum.Enum):
        CIFAR = "cifar"

    assert is_data({"a": [1, 2.0, None, True, "x"]}) and not is_data({1: "a"})
    assert not is_data(Style.CIFAR) and not is_data(Path("a"))
    assert is_data(with_plain_values({"style": Style.CIFAR, "path": [Path("a")]}))
    assert not is_data(with_plain_values(object()))


@pytest.mark.slow
def test_the_export_package_never_imports_the_command():
    imported = modules_imported_by(
        "import signorm_lab.export",
        (
            "signorm_lab.cli",
            "signorm_lab.cli.recipe_parsing",
            "lightning.pytorch.cli",
        ),
    )
    assert imported == []
