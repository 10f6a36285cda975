"""The recipes in experiments/ through the command on CPU: every method of each backbone family
trains one step (fast_dev_run); the same methods on the other data sets and depths are built.

Data: the recipe's datamodule is swapped for a synthetic CIFAR-shaped one (digits recipes keep
their bundled real data). Width: a full-size network would take minutes per step on 2 CPU
cores, so ResNet-family backbones run at ``width_multiplier=0.25`` and WideResNet-28 backbones
at widen factor 1 instead of 10; depth, blocks, ensemble sizes and every other recipe value are
those of the recipe.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch
from torch_uncertainty.models.classification.resnet.utils import ResNetStyle

from fixtures.narrow_models import narrow_wideresnets  # noqa: F401 (a pytest fixture)
from fixtures.synthetic_datamodule import SyntheticDataModule
from signorm_lab.cli import cli_main
from signorm_lab.cli.recipe_bases import composed_recipe
from torch_uncertainty_signorm.signorm.optim import (
    ADAPTIVE_SCALE_LR_MULTIPLIER,
    is_adaptive,
    scale_rate,
)

EXPERIMENTS = Path(__file__).parents[2] / "experiments"
# Transformer recipes (pretrained ViT / BERT) run in test_transformer_recipes_run.py, the text
# quickstart (tweets_minilm_*, a tokenizer and text data) in its own tests.
RECIPES = sorted(
    p for p in EXPERIMENTS.glob("*.yaml") if not p.stem.startswith(("vit_", "bert_", "tweets_"))
)
#: One recipe run per method and backbone family: these families train one step, the others
#: (the same methods on CIFAR-100 or ResNet-50) are built through the command.
TRAINED_FAMILIES = ("resnet18_c10_", "wrn_c10_", "digits_")
TRAINED_RECIPES = [p for p in RECIPES if p.stem.startswith(TRAINED_FAMILIES)]
BUILT_RECIPES = [p for p in RECIPES if p not in TRAINED_RECIPES]
NARROW_RESNET = 0.25  # Masksembles needs >= 10 channels: stem 16, stages 16/32/64/128


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
    model = factory(**args)
    for module in model.modules():  # as after training: norms away from their initial state
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            module.running_mean.add_(0.1)
            module.num_batches_tracked.fill_(1)
    path = directory / "single.pt"
    torch.save(model.state_dict(), path)
    return path


def _cpu_args(recipe: Path, directory: Path) -> tuple[dict, list[str]]:
    """The recipe, and the command-line options running it on CPU at test size (no subcommand)."""
    config = composed_recipe(recipe)
    args = [
        "--config",
        str(recipe),
        "--trainer.accelerator=cpu",
        "--trainer.devices=1",
        "--trainer.precision=32",
    ]
    if "digits" not in recipe.stem:
        args += [
            f"--data={SyntheticDataModule.__module__}.SyntheticDataModule",
            "--data.init_args.batch_size=4",
            "--data.init_args.num_workers=0",
        ]
    for path, block in _backbone_blocks(config):
        if "resnet" in block["class_path"] and "wideresnet" not in block["class_path"]:
            args.append(f"--{path}.init_args.width_multiplier={NARROW_RESNET}")
        if recipe.stem.endswith("finetune"):
            checkpoint = _single_model_checkpoint(block, directory)
            args.append(f"--{path.rsplit('.model', 1)[0]}.checkpoint={checkpoint}")
    return config, args


def _members(tree) -> int:
    """The ensemble size a recipe's model block asks for (1 for a single model)."""
    if isinstance(tree, dict):
        if "num_estimators" in tree:
            return int(tree["num_estimators"])
        if "core_models" in tree:
            return len(tree["core_models"])
        return max((_members(value) for value in tree.values()), default=1)
    return 1


@pytest.mark.slow
@pytest.mark.parametrize("recipe", BUILT_RECIPES, ids=lambda p: p.stem)
@pytest.mark.usefixtures("narrow_wideresnets")
def test_recipe_builds_its_ensemble_through_the_command(recipe, tmp_path, monkeypatch):
    """The recipes of a family whose every method trains below (CIFAR-100 and ResNet-50 variants)
    are built through the command, not trained: the model gives member-major logits of the
    recipe's M and classes on a CIFAR-shaped batch."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["torch-uncertainty"])
    config, args = _cpu_args(recipe, tmp_path)
    cli = cli_main(args, run=False)
    model = cli.model.model.eval()
    with torch.no_grad():
        logits = model(torch.randn(2, 3, 32, 32))
    classes = config["routine"]["init_args"]["num_classes"]
    assert tuple(logits.shape) == (2 * _members(config["routine"]["init_args"]["model"]), classes)


@pytest.mark.slow
@pytest.mark.parametrize("recipe", TRAINED_RECIPES, ids=lambda p: p.stem)
@pytest.mark.usefixtures("narrow_wideresnets")
def test_recipe_fast_dev_runs_on_cpu(recipe, tmp_path, monkeypatch):
    """One training step through the command: every method of each backbone family (ResNet-18
    and WideResNet-28 on CIFAR-10, the digits ResNet and the pretrained EfficientNet-Lite0)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["torch-uncertainty"])
    config, args = _cpu_args(recipe, tmp_path)
    args = ["fit", *args, "--trainer.fast_dev_run=1"]
    cli = cli_main(args)
    assert cli.trainer.state.finished and cli.trainer.global_step == 1
    if "signorm" in recipe.stem:
        groups = cli.trainer.optimizers[0].param_groups
        base, scales = groups[0], groups[-1]
        members = config["routine"]["init_args"].get("member_lr_multiplier", 1)
        assert len(groups) == (2 if members == 1 else 3)
        # Unset (the Adam FineTune recipes): 3x under Adam, 100x under SGD (docs/settings.md).
        rate = scale_rate(
            config["routine"]["init_args"].get("scale_lr_multiplier"),
            is_adaptive(cli.trainer.optimizers[0]),
        )
        assert scales["lr"] == pytest.approx(rate * members * base["lr"])
        if recipe.stem.endswith("finetune"):
            assert rate == ADAPTIVE_SCALE_LR_MULTIPLIER
        assert scales["weight_decay"] == 0


@pytest.mark.slow
def test_one_step_run_writes_results_that_the_tables_and_regression_read(
    tmp_path, monkeypatch, capsys
):
    """recipe -> fit (max_steps=1, ending before the first validation: EarlyStopping must not fail)
    -> test -> results.csv with OOD columns -> results_table -> regression."""
    from fixtures.tu_results import TU_HEADER
    from signorm_lab.reproduction import regression, results_table

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["torch-uncertainty"])
    cli = cli_main(
        [
            "fit",
            "--config",
            str(EXPERIMENTS / "resnet18_c10_signorm.yaml"),
            "--trainer.max_steps=1",
            "--trainer.accelerator=cpu",
            "--trainer.precision=32",
            f"--data={SyntheticDataModule.__module__}.SyntheticDataModule",
            "--data.init_args.batch_size=4",
            "--data.init_args.num_samples=16",
            f"--routine.init_args.model.init_args.model.init_args.width_multiplier={NARROW_RESNET}",
        ]
    )
    assert cli.trainer.global_step == 1 and cli.trainer.fit_loop.epoch_loop.batch_idx < 3
    (results,) = (tmp_path / "logs").rglob("results.csv")
    with results.open() as file:
        header = next(csv.reader(file))
    assert set(TU_HEADER) <= set(header)  # the format the fast reporting tests assume
    out = tmp_path / "tables"
    results_table.main(["--run", f"ours={results.parent}", "--out", str(out)])
    (row,) = csv.DictReader((out / "rows.csv").open())
    assert {
        "Acc",
        "AUROC",
        "AUPR",
        "FPR95",
        "Params",
        "MAdds",
        "signorm_cos",
        "U_mod",
        "jensen_gap",
    } <= set(row)
    assert 0 <= float(row["AUROC"]) <= 100  # percent, from ood/AUROC's fraction
    capsys.readouterr()
    assert regression.main([str(out / "rows.csv"), "--reference", str(out / "rows.csv")]) == 0
    assert "0 of 13 metrics failed" in capsys.readouterr().out  # the diversity columns too
