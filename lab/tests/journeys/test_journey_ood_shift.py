"""Journey 2: ``test --ckpt_path <checkpoint>`` with the near/far OOD + severity overlay."""

import pytest
from journey_commands import EXPERIMENTS, best_checkpoint, failure, results_row, tiny_args

from fixtures.cifar_files import run_command

NEAR, FAR = ("CIFAR100", "TinyImageNet"), ("MNIST", "SVHN", "Textures", "Places365")


@pytest.mark.slow
def test_best_checkpoint_under_the_ood_shift_overlay(
    signorm_run, cifar_root, command_env, tmp_path
):
    done = run_command(
        [
            "test",
            "--config",
            EXPERIMENTS / "resnet18_c10_signorm.yaml",
            "--config",
            EXPERIMENTS / "eval" / "c10_ood_shift.yaml",
            "--ckpt_path",
            best_checkpoint(signorm_run.log_dir),
            *tiny_args(cifar_root, tmp_path / "logs"),
        ],
        cwd=tmp_path,
        env=command_env,
    )
    assert done.returncode == 0, failure(done)
    row, after_fit = results_row(tmp_path / "logs"), results_row(signorm_run.log_dir)

    expected = [
        f"ood_{group}/{name}/{metric}"
        for group, names in (("near", NEAR), ("far", FAR))
        for name in names
        for metric in ("AUROC", "AUPR", "FPR95")
    ]
    expected += [
        f"ood_{group}/{metric}"
        for group in ("near", "far")
        for metric in ("AUROC", "AUPR", "FPR95")
    ]
    expected += [
        f"shift/{severity}/{metric}"
        for severity in ("s1", "s2", "s3", "s4", "s5", "mean")
        for metric in ("Acc", "NLL", "ECE")
    ]
    assert not [key for key in expected if key not in row], sorted(row)
    assert all(0 <= row[key] <= 1 for key in expected if "NLL" not in key)
    assert row["ood_far/AUROC"] == pytest.approx(
        sum(row[f"ood_far/{name}/AUROC"] for name in FAR) / len(FAR), abs=1e-4
    )
    # The same checkpoint on the same clean test set (and the same SVHN test set) as the test
    # that eval_after_fit ran at the end of fit.
    for key in ("test/cls/Acc", "test/cls/NLL", "test/cal/ECE"):
        assert row[key] == pytest.approx(after_fit[key], abs=1e-4), key
    assert row["ood_far/SVHN/AUROC"] == pytest.approx(after_fit["ood/AUROC"], abs=1e-4)
