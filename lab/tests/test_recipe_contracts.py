"""What the recipes in experiments/ promise, read from each composed recipe without training:
results.csv, the OOD sets and an accuracy EarlyStopping for the tables, every family present,
and the transformer recipes' settings against the paper's appendix. These checks parse YAML
only, so they sit in the fast tier; the recipe runs are in test_recipes_run.py and
test_transformer_recipes_run.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from signorm_lab.cli.recipe_bases import composed_recipe

EXPERIMENTS = Path(__file__).parents[2] / "experiments"
TRANSFORMER_RECIPES = sorted([*EXPERIMENTS.glob("vit_*.yaml"), *EXPERIMENTS.glob("bert_*.yaml")])


ALL_RECIPES = sorted(EXPERIMENTS.glob("*.yaml"))
CIFAR_DATAMODULES = (
    "torch_uncertainty.datamodules.CIFAR10DataModule",
    "torch_uncertainty.datamodules.CIFAR100DataModule",
)


@pytest.mark.parametrize("recipe", ALL_RECIPES, ids=lambda p: p.stem)
def test_every_recipe_writes_results_for_the_tables(recipe):
    """results.csv (save_to_csv), OOD columns on CIFAR (eval_ood, SVHN), and an EarlyStopping on
    accuracy that maximises it and waits for a validation."""
    config = composed_recipe(recipe)
    assert config["routine"]["init_args"].get("save_to_csv") is True, recipe.name
    assert config.get("eval_after_fit") is True, recipe.name
    data = config["data"]
    # ImageNet's OOD sets come from experiments/eval/imagenet_ood_shift.yaml.
    if data["class_path"] in CIFAR_DATAMODULES or data["class_path"].startswith(
        "signorm_lab.datamodules."
    ):
        # TorchUncertainty's one OOD set, or the near/far sets of OODShiftEvaluation.
        ood = data["init_args"].get("eval_ood") or data["init_args"].get("eval_near_far_ood")
        assert ood is True, recipe.name
    for callback in config["trainer"].get("callbacks", []):
        if callback["class_path"].endswith("EarlyStopping"):
            args = callback["init_args"]
            assert args["monitor"] == "val/cls/Acc"
            assert args["mode"] == "max" and args["check_on_train_epoch_end"] is False


def test_recipe_families_are_all_covered():
    """The check above sees every family: 54 CNN CIFAR recipes and 4 ViT CIFAR-100 ones (OOD on),
    ViT ImageNet, BERT SST-2 and the digits quickstart."""
    cifar = [
        p for p in ALL_RECIPES if composed_recipe(p)["data"]["class_path"] in CIFAR_DATAMODULES
    ]
    assert len(cifar) >= 58
    for family in (
        "resnet18_c10_",
        "resnet50_c100_",
        "wrn_c10_",
        "vit_c100_",
        "vit_imagenet_",
        "bert_sst2_",
        "digits_",
    ):
        assert any(p.stem.startswith(family) for p in ALL_RECIPES), family


def _values(tree, key):
    """Every value of ``key`` anywhere in a parsed recipe."""
    if isinstance(tree, dict):
        for name, value in tree.items():
            if name == key:
                yield value
            yield from _values(value, key)
    elif isinstance(tree, list):
        for value in tree:
            yield from _values(value, key)


#: (members, max_steps, tau, checkpoint) of the paper's Appendix "Implementation details".
PAPER = {
    "vit_c100": (4, 10_000, 0.5, "vit_base_patch16_224.orig_in21k"),
    "vit_imagenet": (4, 20_000, 1.0, "vit_base_patch16_224.augreg_in21k"),
    "bert_sst2": (3, 6_315, 0.5, "bert-base-uncased"),
}


@pytest.mark.parametrize("recipe", TRANSFORMER_RECIPES, ids=lambda p: p.stem)
def test_transformer_recipe_follows_the_shared_recipe(recipe):
    config = composed_recipe(recipe)
    prefix, method = next(
        (k, recipe.stem.removeprefix(k + "_")) for k in PAPER if recipe.stem.startswith(k + "_")
    )
    members, steps, tau, checkpoint = PAPER[prefix]
    optimizer, schedule = config["optimizer"], config["lr_scheduler"]["init_args"]
    assert optimizer["class_path"] == "torch.optim.SGD"
    scale = members if method == "deep_ensembles" else 1  # joint training: loss averaged over M
    assert optimizer["init_args"] == {
        "lr": pytest.approx(0.01 * scale),
        "momentum": 0.9,
        "weight_decay": 0.0,
    }
    assert config["trainer"]["max_steps"] == schedule["total_steps"] == steps
    assert schedule["warmup_steps"] == (0 if method == "signorm" else 500)
    assert set(_values(config["routine"], "model_name")) == {checkpoint}
    assert all(pretrained is True for pretrained in _values(config["routine"], "pretrained"))
    assert config["data"]["init_args"]["batch_size"] == (32 if prefix == "bert_sst2" else 256)
    if method not in ("single", "signorm"):  # σN-Ens takes M from its model alone
        repeats = config["routine"]["init_args"]["format_batch_fn"]["init_args"]["num_repeats"]
        assert repeats == members
    if method == "signorm":
        assert "format_batch_fn" not in config["routine"]["init_args"]
    if method != "single":
        core = list(_values(config["routine"], "core_models"))
        estimators = set(_values(config["routine"], "num_estimators"))
        assert estimators | {len(c) for c in core} == {members}
    if method == "signorm":
        ensemble = config["routine"]["init_args"]["model"]["init_args"]
        assert (ensemble["tau"], ensemble["diversity_strength"]) == (tau, 1e-3)
        assert ensemble["regularized_layers"] == "transformer"
