"""TorchUncertainty's own recipe format through the ``torch-uncertainty`` command.

The recipes of ``tests/fixtures/tu_format/`` are written as TorchUncertainty's CIFAR recipes are
(no ``class_path`` on ``routine:``/``data:``, ``loss: CrossEntropyLoss``, ``style: cifar``, the
Deep Ensembles ``model:`` block). TorchUncertainty's own CIFAR recipes (removed upstream in
February 2026) are each trained one step too, read from ``../shared/torch-uncertainty-recipes``
beside the checkout (their repository's layout) or, with ``TORCH_UNCERTAINTY_REPO`` set, from a git
clone of TorchUncertainty; with neither, those cases are skipped, or fail where
``SIGNORM_REQUIRE_TU_RECIPES=1`` (``.ci/run`` sets it).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from torch_uncertainty.routines import ClassificationRoutine

from fixtures.narrow_models import narrow_wideresnets  # noqa: F401 (a pytest fixture)
from fixtures.synthetic_datamodule import SyntheticDataModule
from signorm_lab.cli import cli_main, main, tu_format_args
from signorm_lab.cli.tu_format import check_datamodule_named
from tools.write_tu_recipes import EXPORT_FOLDER, exported_recipes

FIXTURES = Path(__file__).parent / "fixtures" / "tu_format"
SYNTHETIC = f"{SyntheticDataModule.__module__}.SyntheticDataModule"
CPU = ["--trainer.accelerator=cpu", "--trainer.devices=1", "--trainer.precision=32"]
ONE_STEP = ["--trainer.fast_dev_run=1", "--data.init_args.batch_size=2"]


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["torch-uncertainty"])


def _fit(config: str | Path, *extra: str):
    return cli_main(["fit", "--config", str(config), "--data", SYNTHETIC, *CPU, *ONE_STEP, *extra])


def test_tu_recipe_trains_one_step_unmodified(tmp_path):
    recipe = FIXTURES / "packed.yaml"
    before = recipe.read_text()
    cli = _fit(recipe, "--routine.init_args.model.init_args.width_multiplier=0.125")
    assert cli.trainer.state.finished and cli.trainer.global_step == 1
    assert type(cli.routine) is ClassificationRoutine  # no class_path: TU's routine
    assert isinstance(cli.datamodule, SyntheticDataModule)
    model = cli.config.fit.routine.init_args.model.init_args
    assert model.style.name == "CIFAR" and model.width_multiplier == 0.125
    assert isinstance(cli.routine.loss, torch.nn.CrossEntropyLoss)
    assert cli.routine.format_batch_fn.num_repeats == 4
    optimizer = cli.trainer.optimizers[0]
    assert optimizer.defaults["lr"] == 0.05 and optimizer.defaults["weight_decay"] == 5e-4
    assert recipe.read_text() == before


def test_deep_ensembles_model_block_and_moved_class_path():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_info:
        main(
            [
                "fit",
                "--config",
                str(FIXTURES / "deep_ensembles.yaml"),
                "--data",
                "CIFAR10DataModule",
                "--print_config",
            ]
        )
    assert exit_info.value.code in (0, None)
    config = yaml.safe_load(out.getvalue())
    assert config["routine"]["class_path"] == "torch_uncertainty.routines.ClassificationRoutine"
    model = config["routine"]["init_args"]["model"]
    assert model["class_path"] == "torch_uncertainty.methods.deep_ensembles"
    assert model["init_args"]["core_models"]["init_args"]["style"] == "CIFAR"
    assert config["data"]["class_path"] == "torch_uncertainty.datamodules.CIFAR10DataModule"
    assert config["data"]["init_args"]["batch_size"] == 128


def test_missing_datamodule_lists_torch_uncertainty_datamodules():
    with pytest.raises(
        ValueError,
        match=r"no class_path.*--data CIFAR10DataModule.*"
        r"CIFAR100DataModule.*MNISTDataModule",
    ):
        cli_main(["fit", "--config", str(FIXTURES / "packed.yaml"), *CPU])


def test_an_overlay_data_block_merges_into_the_recipes_datamodule():
    recipe, overlay = {"data": {"class_path": SYNTHETIC}}, {"data": {"eval_ood": True}}
    check_datamodule_named([recipe, overlay], None)  # the recipe names it
    with pytest.raises(ValueError, match="no class_path"):
        check_datamodule_named([overlay], None)
    check_datamodule_named([overlay], SYNTHETIC)


def test_unknown_datamodule_is_named():
    with pytest.raises(
        ValueError,
        match=r"--data 'CIFAR10Data' is not a datamodule.*"
        r"CIFAR10DataModule",
    ):
        tu_format_args(["fit", "--data", "CIFAR10Data"])


def test_datamodule_names_resolve_and_recipes_keep_their_class_paths():
    args = tu_format_args(["fit", "--config", "x.yaml", "--data=CIFAR100DataModule"])
    assert args == [
        "fit",
        "--routine=torch_uncertainty.routines.ClassificationRoutine",
        "--data=torch_uncertainty.datamodules.CIFAR100DataModule",
        "--config",
        "x.yaml",
        "--data=torch_uncertainty.datamodules.CIFAR100DataModule",
    ]


# --- TorchUncertainty's own CIFAR recipes (snapshot of January 2026) ------------------------

TU_REPO = os.environ.get("TORCH_UNCERTAINTY_REPO")
#: TorchUncertainty's recipes in its repository's layout, beside the checkout (used by default).
TU_RECIPES_COPY = Path(__file__).resolve().parents[3] / "shared" / "torch-uncertainty-recipes"
TU_RECIPES = [
    f"experiments/classification/{dataset}/configs/{backbone}/{method}.yaml"
    for dataset, backbone, method in [
        *[
            ("cifar10", b, m)
            for b in ("resnet18", "resnet50", "wideresnet28x10")
            for m in ("standard", "packed", "batched", "masked", "mimo", "deep_ensembles")
        ],
        *[
            ("cifar100", b, m)
            for b in ("resnet18", "resnet50")
            for m in ("standard", "packed", "batched", "masked", "mimo")
        ],
        ("cifar100", "wideresnet28x10", "standard"),
    ]
]


def _tu_recipe(path: str, tmp_path: Path) -> Path:
    if TU_REPO:
        text = subprocess.run(
            ["git", "-C", TU_REPO, "show", f"HEAD:{path}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    elif (TU_RECIPES_COPY / path).is_file():
        text = (TU_RECIPES_COPY / path).read_text()
    else:
        missing = (
            f"neither TORCH_UNCERTAINTY_REPO (a git clone of TorchUncertainty) is set nor "
            f"{TU_RECIPES_COPY / path} exists"
        )
        if os.environ.get("SIGNORM_REQUIRE_TU_RECIPES") == "1":  # CI (.ci/run): a failure
            pytest.fail(
                f"{missing}; CI needs TorchUncertainty's recipes at {TU_RECIPES_COPY}",
                pytrace=False,
            )
        pytest.skip(missing)
    recipe = tmp_path / Path(path).name
    recipe.write_text(text)
    return recipe


@pytest.mark.slow
@pytest.mark.parametrize(
    "path",
    [
        pytest.param(
            path,
            marks=pytest.mark.xfail(
                raises=IndexError,
                strict=True,
                reason="TU's CIFAR-100 packed recipes build the network with num_classes: 10",
            ),
        )
        if "cifar100/configs/resnet" in path and path.endswith("packed.yaml")
        else path
        for path in TU_RECIPES
    ],
    ids=lambda p: "-".join(Path(p).with_suffix("").parts[2::2]),
)
@pytest.mark.usefixtures("narrow_wideresnets")
def test_torch_uncertainty_recipe_trains_one_step(path, tmp_path):
    """One step at a quarter width (ResNets) or widen factor 1 (WideResNet-28-10, which has no
    width option: its factories are narrowed in the process), 4 images."""
    recipe = _tu_recipe(path, tmp_path)
    config = yaml.safe_load(recipe.read_text())
    routine = config.get("routine", config.get("model"))
    key, model = "model", routine["model"]
    if "core_models" in model["init_args"]:
        key, model = "model.init_args.core_models", model["init_args"]["core_models"]
    narrow = (
        []
        if "wideresnet" in model["class_path"]
        else [f"--routine.init_args.{key}.init_args.width_multiplier=0.25"]
    )
    cli = _fit(
        recipe,
        *narrow,
        "--data.init_args.batch_size=4",
        f"--data.init_args.num_classes={routine['num_classes']}",
    )
    assert cli.trainer.state.finished and cli.trainer.global_step == 1
    assert type(cli.routine) is ClassificationRoutine


# --- the σN-Ens, FineTune and FiLM rows in TorchUncertainty's format -------------------------

EXPERIMENTS = Path(__file__).parents[2] / "experiments"


def test_exported_recipes_are_up_to_date():
    """``experiments/torch_uncertainty/`` is generated: rerun
    ``python tools/write_tu_recipes.py experiments`` after editing a recipe."""
    expected = exported_recipes(EXPERIMENTS)
    on_disk = {p.relative_to(EXPERIMENTS) for p in (EXPERIMENTS / EXPORT_FOLDER).rglob("*.yaml")}
    assert on_disk == set(expected)
    stale = [str(p) for p, text in expected.items() if (EXPERIMENTS / p).read_text() != text]
    assert not stale, f"regenerate: {stale}"
    assert len(expected) == 18


def test_exported_signorm_row_trains_through_the_command():
    recipe = EXPERIMENTS / EXPORT_FOLDER / "cifar10" / "configs" / "resnet18" / "signorm.yaml"
    assert "class_path" not in yaml.safe_load(recipe.read_text())["data"]
    cli = _fit(recipe, "--routine.init_args.model.init_args.model.init_args.width_multiplier=0.125")
    assert cli.trainer.global_step == 1
    assert type(cli.routine).__name__ == "SigmaNormClassificationRoutine"
    scale_ids = {id(p) for p in cli.routine.model.scale_logits()}
    (scales,) = [
        g
        for g in cli.trainer.optimizers[0].param_groups
        if {id(p) for p in g["params"]} == scale_ids
    ]
    assert scales["lr"] == pytest.approx(0.05 * 100) and scales["weight_decay"] == 0.0


def test_exported_film_row_is_torch_uncertainty_routine():
    recipe = EXPERIMENTS / EXPORT_FOLDER / "cifar100" / "configs" / "wideresnet28x10" / "film.yaml"
    assert "class_path" not in yaml.safe_load(recipe.read_text())["routine"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["fit", "--config", str(recipe), "--data", "CIFAR100DataModule", "--print_config"])
    config = yaml.safe_load(out.getvalue())
    assert config["routine"]["class_path"] == "torch_uncertainty.routines.ClassificationRoutine"
    assert config["data"]["class_path"] == "torch_uncertainty.datamodules.CIFAR100DataModule"
