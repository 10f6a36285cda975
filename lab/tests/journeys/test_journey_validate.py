"""``validate --ckpt_path <checkpoint>`` on TorchUncertainty's CIFAR datamodule, which accepts only
the ``fit`` and ``test`` stages itself."""

import re

import pytest
from journey_commands import EXPERIMENTS, best_checkpoint, failure, tiny_args

from fixtures.cifar_files import run_command


@pytest.mark.slow
def test_validate_scores_the_best_checkpoint_as_fit_did(
    signorm_run, cifar_root, command_env, tmp_path
):
    checkpoint = best_checkpoint(signorm_run.log_dir)
    done = run_command(
        [
            "validate",
            "--config",
            EXPERIMENTS / "resnet18_c10_signorm.yaml",
            "--ckpt_path",
            checkpoint,
            *tiny_args(cifar_root, tmp_path / "logs"),
        ],
        cwd=tmp_path,
        env=command_env,
    )
    assert done.returncode == 0, failure(done)
    # The best checkpoint's name holds the validation accuracy fit measured (3 decimals).
    during_fit = float(re.search(r"val_acc=([0-9.]+?)\.ckpt", checkpoint.name).group(1))
    printed = re.search(r"val/cls/Acc\D*?([0-9]+\.[0-9]+)", done.stdout)
    assert printed, failure(done)
    assert float(printed.group(1)) == pytest.approx(during_fit, abs=5e-4)
