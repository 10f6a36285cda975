"""Every transformer recipe (``vit_*``, ``bert_*``) trains one step (fast_dev_run) on CPU offline.

Backbones: each ``timm_vit`` block builds timm's ``test_vit`` (a tiny ViT of the same family) at
32 px from a local weights file, each ``bert_classifier`` block a tiny BERT from a local
``save_pretrained`` directory, through the factories' ``pretrained_path``: the offline path users
take. Data: the ViT recipes' datamodule is swapped for the synthetic CIFAR-shaped one; the SST-2
recipes keep ``SST2DataModule`` on a few local sentences, a local OOD set and a local tokenizer.
ImageNet recipes run with 100 classes instead of 1,000 (TorchUncertainty's smooth-calibration
metric costs about 15 s per validation at 1,000 classes on 2 CPU cores). Every other value
(methods, M, tau, lambda, optimiser, schedule) is the recipe's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from fixtures.backbones import tiny_bert
from fixtures.synthetic_datamodule import SyntheticDataModule
from fixtures.text import write_newsgroups, write_sst2, write_tokenizer
from signorm_lab.cli import cli_main
from signorm_lab.cli.recipe_bases import composed_recipe

EXPERIMENTS = Path(__file__).parents[2] / "experiments"
RECIPES = sorted([*EXPERIMENTS.glob("vit_*.yaml"), *EXPERIMENTS.glob("bert_*.yaml")])
FACTORIES = "signorm_lab.models.backbones."


def _blocks(tree, class_path):
    """Every ``{class_path, init_args}`` block of ``class_path`` in a parsed recipe."""
    if isinstance(tree, dict):
        if tree.get("class_path") == class_path:
            yield tree
        for value in tree.values():
            yield from _blocks(value, class_path)
    elif isinstance(tree, list):
        for value in tree:
            yield from _blocks(value, class_path)


def _as_trained(model: torch.nn.Module) -> torch.nn.Module:
    """Norm scales moved off their initial 1, as in a pretrained checkpoint (σN-Ens's
    pretrained=True rejects weights whose norms are all at their initial state)."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm) and module.weight is not None:
                module.weight.add_(0.01)
    return model


@pytest.fixture(scope="module")
def offline_files(tmp_path_factory):
    """Local weights, tokenizer and datasets, as a user without internet would provide them."""
    import timm
    from safetensors.torch import save_file

    root = tmp_path_factory.mktemp("offline")
    vit_file = root / "test_vit.safetensors"
    save_file(_as_trained(timm.create_model("test_vit", img_size=32)).state_dict(), str(vit_file))
    _as_trained(tiny_bert()).save_pretrained(root / "bert")
    write_tokenizer(root / "tokenizer")
    return {
        "vit": vit_file,
        "bert": root / "bert",
        "tokenizer": root / "tokenizer",
        "sst2": write_sst2(root / "sst2"),
        "ood": write_newsgroups(root / "newsgroups"),
    }


def _offline_recipe(recipe: Path, files: dict, directory: Path) -> Path:
    config = composed_recipe(recipe)  # self-contained: written elsewhere below
    for block in _blocks(config, FACTORIES + "timm_vit"):
        block["init_args"].update(
            model_name="test_vit", img_size=32, pretrained_path=str(files["vit"])
        )
    for block in _blocks(config, FACTORIES + "bert_classifier"):
        block["init_args"]["pretrained_path"] = str(files["bert"])
    if recipe.stem.startswith("bert_"):
        config["data"]["init_args"].update(
            tokenizer=str(files["tokenizer"]),
            local_path=str(files["sst2"]),
            ood_local_path=str(files["ood"]),
            batch_size=4,
        )
    else:
        config["data"] = {
            "class_path": f"{SyntheticDataModule.__module__}.SyntheticDataModule",
            "init_args": {"batch_size": 4, "num_workers": 0},
        }
    if recipe.stem.startswith("vit_imagenet"):
        _set_everywhere(config["routine"], "num_classes", 100)
    path = directory / recipe.name
    path.write_text(yaml.safe_dump(config))
    return path


def _set_everywhere(tree, key, value) -> None:
    if isinstance(tree, dict):
        for name in tree:
            if name == key:
                tree[name] = value
            else:
                _set_everywhere(tree[name], key, value)
    elif isinstance(tree, list):
        for item in tree:
            _set_everywhere(item, key, value)


@pytest.mark.slow
@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_transformer_recipe_fast_dev_runs_on_cpu(recipe, offline_files, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["torch-uncertainty"])
    config = _offline_recipe(recipe, offline_files, tmp_path)
    cli = cli_main(
        [
            "fit",
            "--config",
            str(config),
            "--trainer.fast_dev_run=1",
            "--trainer.accelerator=cpu",
            "--trainer.devices=1",
            "--trainer.precision=32",
        ]
    )
    assert cli.trainer.state.finished and cli.trainer.global_step == 1
    (scheduler_config,) = cli.trainer.lr_scheduler_configs
    assert scheduler_config.interval == "step"
    if recipe.stem.endswith("signorm"):
        base, scales = cli.trainer.optimizers[0].param_groups
        assert scales["lr"] == pytest.approx(100 * base["lr"]) and scales["weight_decay"] == 0
    if recipe.stem.endswith("deep_ensembles"):
        heads = [
            member.get_submodule(name).weight
            for member in cli.routine.model.core_models
            for name in ("head", "model.classifier")
            if _has(member, name)
        ]
        assert len(heads) == cli.routine.model.num_estimators
        assert all(not torch.equal(heads[0], head) for head in heads[1:])


def _has(module: torch.nn.Module, name: str) -> bool:
    try:
        module.get_submodule(name)
    except AttributeError:
        return False
    return True
