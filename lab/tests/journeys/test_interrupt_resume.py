"""A user's ``torch-uncertainty fit`` stopped by SIGTERM (or Ctrl-C), resumed with ``--ckpt_path``.

Real signals, sent by the test-only callback of ``interrupt_points.py`` from inside the subprocess,
on TorchUncertainty's ``CIFAR10DataModule`` (tiny CIFAR files). The finer matrix of interruption
points runs in-process in ``tests/callbacks/test_exact_resume.py``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import torch

from fixtures.cifar_files import run_command

RECIPE = Path(__file__).resolve().parents[3] / "experiments" / "resnet18_c10_signorm.yaml"
RUN_DIR = "logs/signorm/version_0"


def _args(cifar_root: Path) -> list[str]:
    """The recipe, tiny: 2 epochs of 4 batches (50 images, randomly cropped and flipped),
    validation on 20 images (2 batches)."""
    return [
        "fit",
        "--config",
        RECIPE,
        "--seed_everything=0",
        "--trainer.accelerator=cpu",
        "--trainer.devices=1",
        "--trainer.precision=32",
        "--trainer.max_epochs=2",
        "--trainer.enable_progress_bar=false",
        "--trainer.enable_model_summary=false",
        "--trainer.num_sanity_val_steps=0",  # seconds of smooth ECE (journey_commands.tiny_args)
        "--trainer.logger.init_args.save_dir=logs",
        "--trainer.callbacks+=lightning.pytorch.callbacks.ModelCheckpoint",
        "--trainer.callbacks.init_args.save_last=true",
        "--routine.init_args.model.init_args.model.init_args.width_multiplier=0.125",
        f"--data.init_args.root={cifar_root}",
        "--data.init_args.batch_size=16",
        # TorchUncertainty's random crop and flip stay on (basic_augment); worker processes are
        # covered in-process by tests/callbacks/test_exact_resume.py.
        "--data.init_args.num_workers=0",
        "--data.init_args.persistent_workers=false",
        "--data.init_args.eval_ood=false",
        # τ follows a diversity target: the controller's state must resume exactly too.
        "--routine.init_args.target_diversity=0.5",
    ]


def _interrupt(hook: str, batch: int | None = None, action: str = "SIGTERM", epoch: int = 0) -> str:
    init_args = {"hook": hook, "epoch": epoch, "batch": batch, "action": action}
    return "--trainer.callbacks+=" + json.dumps(
        {"class_path": "interrupt_points.InterruptAt", "init_args": init_args}
    )


@pytest.fixture(scope="module")
def env(command_env):
    helpers = str(Path(__file__).parent)
    return {**command_env, "PYTHONPATH": os.pathsep.join([helpers, command_env["PYTHONPATH"]])}


@pytest.fixture(scope="module")
def reference(cifar_root, env, tmp_path_factory) -> Path:
    """The uninterrupted run's directory."""
    cwd = tmp_path_factory.mktemp("reference")
    result = run_command(_args(cifar_root), cwd=cwd, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return cwd / RUN_DIR


def _state(path: Path) -> dict:
    checkpoint = torch.load(path, weights_only=True)
    return {
        "state_dict": checkpoint["state_dict"],
        "global_step": checkpoint["global_step"],
        "epoch": checkpoint["epoch"],
    }


def _assert_same_run(run_dir: Path, reference: Path) -> None:
    actual, expected = (
        _state(run_dir / "checkpoints/last.ckpt"),
        _state(reference / "checkpoints/last.ckpt"),
    )
    assert (actual["global_step"], actual["epoch"]) == (expected["global_step"], expected["epoch"])
    different = [
        k for k, v in expected["state_dict"].items() if not torch.equal(actual["state_dict"][k], v)
    ]
    assert not different, f"{len(different)} tensors differ, e.g. {different[:3]}"
    assert (run_dir / "results.csv").read_text() == (reference / "results.csv").read_text()


#: Where the run is stopped (2 epochs of 4 batches, validation of 2 batches after each epoch):
#: ``(hook, epoch, batch, global step saved, signal, exit status)``, in the order one run meets
#: them. One point in training (SIGTERM, as a scheduler sends) and one in validation (Ctrl-C);
#: the last batch, between epochs and the rest of the matrix run in-process
#: (tests/callbacks/test_exact_resume.py).
STOPS = (
    ("on_train_batch_end", 0, 1, 2, "SIGTERM", 143),
    ("on_validation_batch_end", 1, 0, 8, "SIGINT", 130),
)


@pytest.mark.slow
def test_a_run_stopped_twice_then_resumed_equals_the_uninterrupted_run(
    cifar_root, env, reference, tmp_path
):
    """SIGTERM mid-epoch; the resumed run stopped again by Ctrl-C during the second epoch's
    validation (its checkpoint replacing the one it resumed from); resumed again to the end:
    the same weights, counters and results as the run never stopped, in one version folder."""
    checkpoint = tmp_path / RUN_DIR / "checkpoints" / "interrupted.ckpt"
    resume = []
    for hook, epoch, batch, step, signal_name, status in STOPS:
        result = run_command(
            [*_args(cifar_root), *resume, _interrupt(hook, batch, signal_name, epoch)],
            cwd=tmp_path,
            env=env,
        )
        assert result.returncode == status, result.stderr[-3000:]
        assert checkpoint.is_file()
        assert f"checkpoint {checkpoint.relative_to(tmp_path)}" in result.stderr
        command = re.search(r"Resume with: (.*)", result.stderr).group(1)
        assert command.endswith(f"--ckpt_path {checkpoint.relative_to(tmp_path)}")
        assert torch.load(checkpoint, weights_only=True)["global_step"] == step
        resume = ["--ckpt_path", checkpoint]

    result = run_command([*_args(cifar_root), *resume], cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(p.name for p in (tmp_path / "logs/signorm").iterdir()) == ["version_0"]
    assert not checkpoint.exists()  # the resumed run completed: it removed its checkpoint
    _assert_same_run(tmp_path / RUN_DIR, reference)


@pytest.mark.slow
def test_sigterm_during_the_sanity_check_exits_non_zero_and_writes_nothing(
    cifar_root, env, tmp_path
):
    """Nothing trained yet: no checkpoint (the same command again is the same run)."""
    sanity_check = "--trainer.num_sanity_val_steps=2"  # Lightning's default
    result = run_command(
        [*_args(cifar_root), sanity_check, _interrupt("on_sanity_check_start")],
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 143, result.stderr[-3000:]
    assert "no checkpoint written" in result.stderr
    assert "run the same command again" in result.stderr
    assert not list(tmp_path.rglob("*.ckpt"))
