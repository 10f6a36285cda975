"""``test --routine.init_args.eval_grouping_loss=true``: TorchUncertainty's grouping loss of a
σN-Ens, on the members' features of each input (the wrapper's ``feats_forward``/``linear``)."""

import math

import pytest
from journey_commands import EXPERIMENTS, failure, results_row

from fixtures.cifar_files import run_command


@pytest.mark.slow
def test_grouping_loss_is_evaluated_through_the_command(tmp_path):
    # The quickstart recipe on scikit-learn's bundled digits: 360 test images, enough for the
    # grouping-loss estimator's confidence bins.
    done = run_command(
        [
            "test",
            "--config",
            EXPERIMENTS / "digits_signorm.yaml",
            "--routine.init_args.eval_grouping_loss=true",
            "--data.init_args.eval_ood=false",
            "--trainer.enable_progress_bar=false",
            f"--trainer.logger.init_args.save_dir={tmp_path / 'logs'}",
        ],
        cwd=tmp_path,
    )
    assert done.returncode == 0, failure(done)
    row = results_row(tmp_path / "logs")
    # glest's estimate is debiased: on this untrained model (near-uniform outputs, true grouping
    # loss ~0) it may fall a little below 0.
    assert -0.01 <= row["test/cls/grouping_loss"] <= 1, row
    # The routine's output diversity still reads the logits of each batch (the feature path
    # runs the model's forward, where they are read).
    assert all(
        math.isfinite(row[f"test/div/{name}"]) for name in ("jensen_gap", "geometric_ambiguity")
    ), row
