"""One-step or one-epoch runs of ResNet-18 recipes through the command, offline on CPU: the
random datamodule of ``tests/fixtures/synthetic_datamodule.py``, the backbone narrowed through
TU's ``width_multiplier`` (stem 64 -> 8 channels; depth, blocks, heads and every other recipe
value unchanged) and ``precision=32``."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
import yaml
from command_args import (
    CPU,
    EXPERIMENTS,
    NARROW,
    ROUTINE,
    SYNTHETIC,
    HParamsRoutine,
    class_path_of,
    signorm_args,
)
from lightning.pytorch.callbacks import ProgressBar

from fixtures.synthetic_datamodule import SyntheticDataModule
from signorm_lab.cli import TUSigmaNormCLI, cli_main


def _run_recipe(recipe: str, *extra: str) -> TUSigmaNormCLI:
    return cli_main(
        [
            "fit",
            "--config",
            str(EXPERIMENTS / recipe),
            f"--data={SYNTHETIC}",
            "--data.init_args.batch_size=4",
            "--data.init_args.num_workers=0",
            NARROW,
            *CPU,
            *extra,
        ]
    )


@pytest.mark.slow
def test_baseline_recipe_fast_dev_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cli = _run_recipe("resnet18_c10_single.yaml", "--trainer.fast_dev_run=1")
    assert cli.trainer.state.finished
    assert cli.trainer.global_step == 1
    assert isinstance(cli.datamodule, SyntheticDataModule)
    assert cli.routine.model.linear.out_features == 10
    # Recipe values survive the overrides.
    optimizer = cli.trainer.optimizers[0]
    assert optimizer.defaults["lr"] == 0.05 and optimizer.defaults["weight_decay"] == 5e-4
    assert cli.config.fit.trainer.max_epochs == 75  # fast_dev_run itself runs one step
    assert any(isinstance(c, ProgressBar) for c in cli.trainer.callbacks)


@pytest.mark.slow
def test_eval_after_fit_tests_the_best_checkpoint_and_config_is_saved(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cli = _run_recipe(
        "resnet18_c10_packed.yaml",
        "--data.init_args.eval_ood=true",
        "--trainer.max_epochs=1",
        "--trainer.limit_train_batches=1",
        "--trainer.limit_val_batches=1",
        "--trainer.num_sanity_val_steps=0",
    )
    best = cli.trainer.checkpoint_callback.best_model_path
    assert best and Path(best).is_file()
    assert cli.trainer.state.fn == "test"  # fit, then test
    assert cli.trainer.ckpt_path == best
    metrics = cli.trainer.callback_metrics
    assert "test/cls/Acc" in metrics
    assert any(k.startswith("ood/") for k in metrics)  # eval_ood reached the routine

    saved = Path(cli.trainer.log_dir) / "config.yaml"
    assert saved.is_file()
    config = yaml.safe_load(saved.read_text())
    assert config["routine"]["class_path"] == ROUTINE
    assert config["data"]["class_path"] == SYNTHETIC
    assert config["routine"]["init_args"]["eval_ood"] is True
    assert saved.resolve().parents[2] == tmp_path.resolve() / "logs" / "resnet18_c10"


@pytest.mark.slow
def test_signorm_recipe_trains_scale_logits_in_their_own_group(tmp_path, monkeypatch):
    """The σN-Ens recipe runs, its optimizer built from the routine's parameter groups."""
    monkeypatch.chdir(tmp_path)
    cli = cli_main(
        [
            "fit",
            "--config",
            str(EXPERIMENTS / "resnet18_c10_signorm.yaml"),
            f"--data={SYNTHETIC}",
            "--data.init_args.batch_size=4",
            "--routine.init_args.model.init_args.model.init_args.width_multiplier=0.125",
            *CPU,
            "--trainer.fast_dev_run=1",
        ]
    )
    assert cli.trainer.state.finished and cli.trainer.global_step == 1
    scale_ids = {id(p) for p in cli.routine.model.scale_logits()}
    groups = cli.trainer.optimizers[0].param_groups
    scale_groups = [g for g in groups if {id(p) for p in g["params"]} == scale_ids]
    assert len(scale_groups) == 1
    assert scale_groups[0]["lr"] == pytest.approx(0.05 * 100)
    assert scale_groups[0]["weight_decay"] == 0.0
    others = [g for g in groups if g is not scale_groups[0]]
    assert all(g["lr"] == 0.05 and g["weight_decay"] == 5e-4 for g in others)
    every_other = {id(p) for p in cli.routine.parameters()} - scale_ids
    assert {id(p) for g in others for p in g["params"]} == every_other


@pytest.mark.slow
def test_checkpoints_reload_with_their_routine_block(tmp_path, monkeypatch):
    """Routines saving their hyperparameters reload from checkpoints written by the command."""
    monkeypatch.chdir(tmp_path)
    common = [
        "--config",
        str(EXPERIMENTS / "resnet18_c10_single.yaml"),
        "--eval_after_fit=false",
        f"--routine={class_path_of(HParamsRoutine)}",
        f"--data={SYNTHETIC}",
        "--data.init_args.batch_size=4",
        "--data.init_args.num_workers=0",
        NARROW,
        *CPU,
    ]
    cli = cli_main(["fit", *common, "--trainer.max_epochs=1"])
    best = cli.trainer.checkpoint_callback.best_model_path
    assert cli.trainer.state.fn == "fit"  # eval_after_fit switched off

    routine = HParamsRoutine.load_from_checkpoint(best)
    assert routine.num_classes == 10
    assert routine.model.linear.out_features == 10
    tested = cli_main(["test", *common, "--ckpt_path", best])
    assert tested.trainer.ckpt_path == best
    assert "test/cls/Acc" in tested.trainer.callback_metrics


@pytest.mark.slow
def test_signorm_checkpoint_reloads_and_tests_through_the_command(tmp_path, monkeypatch):
    """load_routine rebuilds the fitted routine exactly; ``test --ckpt_path`` accepts the
    checkpoint with the recipe that wrote it."""
    from signorm_lab.safety.routine_checkpoints import load_routine

    monkeypatch.chdir(tmp_path)
    common = signorm_args(
        "--eval_after_fit=false",
        "--trainer.limit_val_batches=1",
        "--trainer.num_sanity_val_steps=0",
    )
    cli = cli_main(["fit", *common, "--trainer.max_epochs=1", "--trainer.limit_train_batches=1"])
    best = cli.trainer.checkpoint_callback.best_model_path
    loaded = load_routine(best)
    inputs = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(loaded.eval()(inputs), cli.routine.eval()(inputs))
    assert loaded.model.num_estimators == 4 and loaded.scale_lr_multiplier == 100.0

    assert loaded.eval_ood is True  # forwarded from the recipe's datamodule when fitting

    # An evaluation overlay may switch the datamodule's loaders: the checkpoint does not decide.
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*replaced by the datamodule's")
        tested = cli_main(
            [
                "test",
                *common,
                "--ckpt_path",
                best,
                "--trainer.limit_test_batches=1",
                "--data.init_args.eval_ood=false",
            ]
        )
    assert tested.trainer.ckpt_path == best and tested.routine.eval_ood is False
    assert "test/div/jensen_gap" in tested.trainer.callback_metrics
