"""A checkpoint that ``torch-uncertainty fit`` wrote before the member heads' norm had its own
affine (commit d303e6e) tests, through today's command, to the metrics that commit's
``test --ckpt_path`` printed for it (fixture:
``tests/fixtures/make_command_checkpoint_d303e6e.py``)."""

import json
from pathlib import Path

import pytest
from journey_commands import EXPERIMENTS, failure, results_row, tiny_args

from fixtures.cifar_files import run_command

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "data"
#: Metrics of the predictions (the complexity and σNorm-cos rows measure the model's definition,
#: which now counts the heads as ordinary norms).
COMPARED = ("test/cls/", "test/cal/", "test/sc/", "test/ens_", "ood/")


@pytest.mark.slow
def test_a_checkpoint_of_the_earlier_release_tests_to_the_same_metrics(
    cifar_root, command_env, tmp_path
):
    done = run_command(
        [
            "test",
            "--config",
            EXPERIMENTS / "resnet18_c10_signorm.yaml",
            "--ckpt_path",
            DATA / "signorm_c10_command_d303e6e.ckpt",
            *tiny_args(cifar_root, tmp_path / "logs"),
        ],
        cwd=tmp_path,
        env=command_env,
    )
    assert done.returncode == 0, failure(done)
    then = json.loads((DATA / "signorm_c10_command_d303e6e_test.json").read_text())
    now = results_row(tmp_path / "logs")
    compared = {key: value for key, value in then.items() if key.startswith(COMPARED)}
    assert len(compared) >= 20, sorted(then)
    assert {key: now.get(key) for key in compared} == pytest.approx(compared, abs=1.01e-4)
