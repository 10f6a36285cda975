"""``python -m signorm_lab.cli.export`` builds the model as the ``torch-uncertainty``
command does (``style: CIFAR`` in the recipes), so it exports the quickstart and the ResNet
recipes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from signorm_lab.cli import cli_main
from signorm_lab.cli.export import main
from signorm_lab.export import load_ensemble, load_member, member_model

EXPERIMENTS = Path(__file__).parents[2] / "experiments"
QUIET = ["--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false"]


def _assert_reloads(out: Path, model: torch.nn.Module, inputs: torch.Tensor) -> None:
    model.eval()
    with torch.no_grad():
        assert torch.equal(load_ensemble(out)(inputs), model(inputs))
        assert torch.equal(load_member(out, 1)(inputs), member_model(model, 1).eval()(inputs))


@pytest.mark.slow
def test_quickstart_trained_by_the_command_exports_and_reloads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    recipe = str(EXPERIMENTS / "digits_signorm.yaml")
    cli = cli_main(
        [
            "fit",
            "--config",
            recipe,
            "--trainer.max_epochs=1",
            "--trainer.limit_train_batches=2",
            "--trainer.limit_val_batches=1",
            "--eval_after_fit=false",
            *QUIET,
        ]
    )
    ckpt = Path(cli.trainer.checkpoint_callback.best_model_path)

    out = main(
        [
            "--config",
            recipe,
            "--ckpt_path",
            str(ckpt),
            "--output",
            str(tmp_path / "out"),
            "--members",
        ]
    )

    cli.routine.load_state_dict(torch.load(ckpt, weights_only=True)["state_dict"])
    _assert_reloads(out, cli.routine.model, torch.rand(5, 1, 8, 8))
    backbone = json.loads((out / "config.json").read_text())["model"]["init_args"]["model"]
    assert backbone["init_args"]["style"] == "cifar"  # the recipe's CIFAR, as the factory takes it


@pytest.mark.slow
def test_resnet18_recipe_exports_and_reloads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    recipe = str(EXPERIMENTS / "resnet18_c10_signorm.yaml")
    narrow = "--routine.init_args.model.init_args.model.init_args.width_multiplier=0.125"
    cli = cli_main(
        [
            "--config",
            recipe,
            narrow,
            "--trainer.accelerator=cpu",
            "--trainer.precision=32",
            "--trainer.logger=false",
            *QUIET,
        ],
        run=False,
    )
    model = cli.routine.model.train()
    with torch.no_grad():  # running statistics away from their initial values
        model(torch.randn(4, 3, 32, 32) * 2 + 1)
    torch.save({"state_dict": cli.routine.state_dict()}, tmp_path / "run.ckpt")

    out = main(
        [
            "--config",
            recipe,
            "--ckpt_path",
            str(tmp_path / "run.ckpt"),
            "--output",
            str(tmp_path / "out"),
            "--members",
            narrow,
        ]
    )

    _assert_reloads(out, model, torch.randn(3, 3, 32, 32))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out", "run.ckpt"]
