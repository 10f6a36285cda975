"""Every recipe in experiments/ trains one step (fast_dev_run) on CPU through the command.

Data: the recipe's datamodule is swapped for a synthetic CIFAR-shaped one (digits recipes keep
their bundled real data). Width: a full-size network would take minutes per step on 2 CPU
cores, so ResNet-family backbones run at ``width_multiplier=0.25`` and WideResNet-28 backbones
at widen factor 1 instead of 10; depth, blocks, ensemble sizes and every other recipe value are
those of the recipe.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from torch_uncertainty.models.classification.resnet.utils import ResNetStyle
from torch_uncertainty.models.classification.wideresnet import batched, masked, mimo, packed, std

from fixtures.synthetic_datamodule import SyntheticDataModule
from torch_uncertainty_signorm.cli import cli_main

EXPERIMENTS = Path(__file__).parents[1] / "experiments"
# Transformer recipes (pretrained ViT / BERT) run in test_transformer_recipes_run.py.
RECIPES = sorted(p for p in EXPERIMENTS.glob("*.yaml") if not p.stem.startswith(("vit_", "bert_")))
NARROW_RESNET = 0.25  # Masksembles needs >= 10 channels: stem 16, stages 16/32/64/128
WIDE_RESNETS = (
    std._WideResNet, packed._PackedWideResNet, batched._BatchWideResNet,
    masked._MaskedWideResNet, mimo._MIMOWideResNet,
)


@pytest.fixture
def narrow_wideresnets(monkeypatch):
    """WideResNet-28-10 factories build widen factor 1: same depth and block structure."""
    for cls in WIDE_RESNETS:
        original = cls.__init__

        def init(self, *args, _original=original, **kwargs):
            kwargs["widen_factor"] = 1
            _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", init)


def _backbone_blocks(tree, path=()):
    """(dotted path, block) of every TorchUncertainty network block in a recipe."""
    if isinstance(tree, dict):
        if str(tree.get("class_path", "")).startswith("torch_uncertainty.models."):
            yield ".".join(path), tree
        for key, value in tree.items():
            yield from _backbone_blocks(value, (*path, key))


def _single_model_checkpoint(block: dict, directory: Path) -> Path:
    """Weights of the (narrowed) single model a FineTune recipe converts."""
    module_name, _, name = block["class_path"].rpartition(".")
    factory = getattr(__import__(module_name, fromlist=[name]), name)
    args = dict(block["init_args"])
    args["style"] = ResNetStyle[args["style"]]
    if name == "resnet":
        args["width_multiplier"] = NARROW_RESNET
    path = directory / "single.pt"
    torch.save(factory(**args).state_dict(), path)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_recipe_fast_dev_runs_on_cpu(recipe, tmp_path, monkeypatch, narrow_wideresnets):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["torch-uncertainty"])
    config = yaml.safe_load(recipe.read_text())
    args = ["fit", "--config", str(recipe), "--trainer.fast_dev_run=1",
            "--trainer.accelerator=cpu", "--trainer.devices=1", "--trainer.precision=32"]
    if "digits" not in recipe.stem:
        args += [f"--data={SyntheticDataModule.__module__}.SyntheticDataModule",
                 "--data.init_args.batch_size=4", "--data.init_args.num_workers=0"]
    for path, block in _backbone_blocks(config):
        if "resnet" in block["class_path"] and "wideresnet" not in block["class_path"]:
            args.append(f"--{path}.init_args.width_multiplier={NARROW_RESNET}")
        if recipe.stem.endswith("finetune"):
            checkpoint = _single_model_checkpoint(block, tmp_path)
            args.append(f"--{path.rsplit('.model', 1)[0]}.checkpoint={checkpoint}")
    cli = cli_main(args)
    assert cli.trainer.state.finished and cli.trainer.global_step == 1
    if "signorm" in recipe.stem:
        base, scales = cli.trainer.optimizers[0].param_groups
        assert scales["lr"] == pytest.approx(100 * base["lr"]) and scales["weight_decay"] == 0
