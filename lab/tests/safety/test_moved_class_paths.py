"""Files written before the package's folders were reorganised keep working: every class path a
recipe, a checkpoint's hyper-parameters or an export's ``config.json`` names today still
imports, and the paths of modules that moved are read as their current ones through the one
table :data:`~signorm_lab.safety.allowlist.MOVED_CLASS_PATHS`."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from signorm_lab.cli.recipe_parsing import parse_recipe
from signorm_lab.safety.allowlist import (
    MOVED_CLASS_PATHS,
    current_class_paths,
    import_object,
)
from signorm_lab.safety.routine_checkpoints import load_routine
from torch_uncertainty_signorm import export

ROOT = Path(__file__).parents[3]
DATA = ROOT / "lab" / "tests" / "fixtures" / "data"
OLD_ENSEMBLE = "torch_uncertainty_signorm.ensemble.signorm_ensemble"
NEW_ENSEMBLE = "torch_uncertainty_signorm.signorm.ensemble.signorm_ensemble"


def _stored_class_paths() -> set[str]:
    """Every ``class_path`` of this package named by the recipes and test recipes on disk."""
    files = [*ROOT.glob("experiments/**/*.yaml"), *ROOT.glob("lab/tests/fixtures/**/*.yaml")]
    found = set()
    for path in files:
        found |= set(
            re.findall(r"class_path:\s*(torch_uncertainty_signorm[\w.]*)", path.read_text())
        )
    return found


@pytest.mark.parametrize("path", sorted(_stored_class_paths()))
def test_every_class_path_a_stored_recipe_names_imports(path):
    assert callable(import_object(path))


@pytest.mark.parametrize("old", sorted(MOVED_CLASS_PATHS))
def test_each_moved_path_imports_the_object_of_its_current_path(old):
    assert import_object(old) is import_object(MOVED_CLASS_PATHS[old])


def test_moved_paths_are_replaced_at_any_depth_and_the_tree_is_left_as_it_was():
    tree = {
        "class_path": OLD_ENSEMBLE,
        "init_args": {
            "config": {"class_path": "torch_uncertainty_signorm.config.SigmaNormConfig"},
            "layers": ["torch_uncertainty_signorm.baselines.film_ensemble.FiLMEnsemble", "bn1"],
            # moved to the lab in 0.2.0: a folder, and a name of a folder that stayed
            "data": {"class_path": "torch_uncertainty_signorm.datamodules.DigitsDataModule"},
            "callbacks": ["torch_uncertainty_signorm.callbacks.ExactResumeCheckpoint"],
        },
    }
    current = current_class_paths(tree)
    assert current == {
        "class_path": NEW_ENSEMBLE,
        "init_args": {
            "config": {"class_path": "torch_uncertainty_signorm.signorm.config.SigmaNormConfig"},
            "layers": ["signorm_lab.baselines.film.model.FiLMEnsemble", "bn1"],
            "data": {"class_path": "signorm_lab.datamodules.DigitsDataModule"},
            "callbacks": ["signorm_lab.callbacks.ExactResumeCheckpoint"],
        },
    }
    assert tree["class_path"] == OLD_ENSEMBLE


def test_a_recipe_naming_a_moved_path_parses_as_the_command_reads_it(tmp_path):
    recipe = yaml.safe_load((ROOT / "experiments" / "digits_signorm.yaml").read_text())
    recipe["routine"]["init_args"]["model"]["class_path"] = OLD_ENSEMBLE
    (tmp_path / "old.yaml").write_text(yaml.safe_dump(recipe))
    model = parse_recipe(tmp_path / "old.yaml").routine.init_args.model
    assert model.class_path == NEW_ENSEMBLE


def test_a_checkpoint_naming_a_moved_path_loads(tmp_path):
    """The command's checkpoint names the package root's factory; the same checkpoint with the
    factory's former module path loads to the same model."""
    checkpoint = torch.load(
        DATA / "signorm_c10_command_d303e6e.ckpt", map_location="cpu", weights_only=True
    )
    assert checkpoint["hyper_parameters"]["model"]["class_path"] == (
        "torch_uncertainty_signorm.signorm_ensemble"
    )
    today = load_routine(DATA / "signorm_c10_command_d303e6e.ckpt", map_location="cpu")
    checkpoint["hyper_parameters"]["model"]["class_path"] = OLD_ENSEMBLE
    torch.save(checkpoint, tmp_path / "old.ckpt")
    old = load_routine(tmp_path / "old.ckpt", map_location="cpu")
    assert type(old.model) is type(today.model)
    old_state = old.model.state_dict()
    assert old_state.keys() == today.model.state_dict().keys()
    for name, tensor in today.model.state_dict().items():
        torch.testing.assert_close(old_state[name], tensor, msg=name)


def test_an_export_naming_a_moved_path_loads_and_predicts_what_it_predicted(tmp_path):
    folder = shutil.copytree(DATA / "signorm_resnet_d303e6e_export", tmp_path / "export")
    config = json.loads((folder / "config.json").read_text())
    assert config["model"]["class_path"] == "torch_uncertainty_signorm.signorm_ensemble"
    config["model"]["class_path"] = OLD_ENSEMBLE
    (folder / "config.json").write_text(json.dumps(config))
    io = load_file(DATA / "signorm_resnet_d303e6e_io.safetensors")
    with torch.no_grad():
        torch.testing.assert_close(
            export.load_ensemble(folder)(io["inputs"]), io["logits"], rtol=1e-5, atol=1e-5
        )
        batch = io["inputs"].shape[0]
        torch.testing.assert_close(
            export.load_member(folder, 1)(io["inputs"]),
            io["logits"][batch : 2 * batch],
            rtol=1e-5,
            atol=1e-5,
        )
