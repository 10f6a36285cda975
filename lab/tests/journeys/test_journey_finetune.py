"""Journey 4: FineTune from the single model's checkpoint; without one it fails before training."""

import pytest
import torch
from journey_commands import (
    EXPERIMENTS,
    PLAIN_WIDTH,
    best_checkpoint,
    failure,
    tiny_args,
)

from fixtures.cifar_files import run_command

CHECKPOINT = "--routine.init_args.model.init_args.checkpoint"
ADAM_LR = 1e-3  # resnet18_c10_signorm_finetune.yaml


def _fit(recipe: str, *args, cwd, env, **tiny) -> object:
    return run_command(
        [
            "fit",
            "--config",
            EXPERIMENTS / recipe,
            "--eval_after_fit=false",
            *args,
            *tiny_args(log_dir=cwd / "logs", **tiny),
        ],
        cwd=cwd,
        env=env,
    )


def _state(ckpt) -> dict[str, torch.Tensor]:
    return torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]


@pytest.mark.slow
def test_finetune_starts_from_the_single_models_checkpoint(cifar_root, command_env, tmp_path):
    (tmp_path / "single").mkdir()
    (tmp_path / "finetune").mkdir()
    done = _fit(
        "resnet18_c10_single.yaml",
        cwd=tmp_path / "single",
        env=command_env,
        data_root=cifar_root,
        width=PLAIN_WIDTH,
    )
    assert done.returncode == 0, failure(done)
    single_ckpt = best_checkpoint(tmp_path / "single")

    done = _fit(
        "resnet18_c10_signorm_finetune.yaml",
        f"{CHECKPOINT}={single_ckpt}",
        cwd=tmp_path / "finetune",
        env=command_env,
        data_root=cifar_root,
    )
    assert done.returncode == 0, failure(done)
    single, finetuned = _state(single_ckpt), _state(best_checkpoint(tmp_path / "finetune"))

    # Every convolution starts from the single model's: two Adam steps move a weight by about
    # the learning rate each, whereas a fresh initialisation differs by ~0.1.
    convs = [key for key in single if key.endswith(".weight") and single[key].dim() == 4]
    assert len(convs) == 20  # ResNet-18: stem, 16 block convs, 3 shortcut convs
    deltas = [
        (finetuned[key.replace("model.", "model.backbone.", 1)] - single[key]).abs().max().item()
        for key in convs
    ]
    assert max(deltas) < 3 * ADAM_LR, dict(zip(convs, deltas, strict=True))
    assert min(deltas) > 0  # and it trained


@pytest.mark.slow
def test_finetune_without_checkpoint_fails_before_training(cifar_root, command_env, tmp_path):
    done = _fit(
        "resnet18_c10_signorm_finetune.yaml", cwd=tmp_path, env=command_env, data_root=cifar_root
    )
    assert done.returncode != 0
    assert CHECKPOINT.lstrip("-") in done.stderr, failure(done)
    assert not list(tmp_path.rglob("*.ckpt")) and not list(tmp_path.rglob("events.out.*"))
    assert "Trainer.fit" not in done.stdout + done.stderr
