"""A tweets-study run through the command, as the study launches it: its results.csv and test
predictions feed the study's tables and its annotator-agreement analysis."""

import pytest
from journey_commands import failure
from safetensors.torch import load_file

from fixtures.cifar_files import run_command
from signorm_lab.reproduction.results_table import mean_std
from signorm_lab.reproduction.runs import find_runs
from studies import tweets_study as study

#: Two steps of 4 tweets and 24 test tweets instead of the study's budget.
TINY = [
    "--trainer.max_steps=2",
    "--lr_scheduler.init_args.total_steps=2",
    "--data.init_args.batch_size=4",
    "--data.init_args.train_size=16",
    "--data.init_args.val_size=8",
    "--data.init_args.test_size=24",
    "--data.init_args.ood_size=24",
]


@pytest.mark.slow
def test_a_study_run_feeds_the_tables_and_the_agreement_analysis(command_env, tmp_path):
    run = study.StudyRun("signorm", 0, num_estimators=2, tau=0.5, part="sweeps")
    command = run.command(tmp_path / "runs")
    assert command[0] == "torch-uncertainty"
    done = run_command([*command[1:], *TINY], cwd=tmp_path, env=command_env)
    assert done.returncode == 0, failure(done)

    log_dir = run.log_dir(tmp_path / "runs")
    (result,) = find_runs([log_dir])
    saved = load_file(log_dir / study.PREDICTIONS)
    assert saved["probs/0"].shape == (2, 24, 3) and saved["probs/1"].shape == (2, 24, 3)
    accuracy = (saved["probs/0"].mean(0).argmax(-1) == saved["targets/0"]).double().mean()
    assert float(accuracy) == pytest.approx(result.metrics["test/cls/Acc"], abs=1e-4)
    assert mean_std([result], ["Acc"])["Acc"] == pytest.approx(100 * float(accuracy), abs=1e-2)

    # The saved order is the datamodule's test order, or agreement_aurocs refuses the file.
    confidence, labels = study.test_confidence(24)
    row = study.agreement_aurocs(log_dir, confidence, labels)
    assert row["tweets"] == int((~confidence.isnan()).sum())
    assert row["low_agreement"] == int((confidence < study.LOW_AGREEMENT).sum())
