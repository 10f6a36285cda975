"""A digits-study run through the command, as the study launches it: its results.csv, trajectory
and member probabilities feed the study's checks and its mutual-information OOD scores."""

import pytest
from journey_commands import failure

from fixtures.cifar_files import run_command
from signorm_lab.reproduction.runs import find_runs
from studies import digits_analysis as analysis
from studies import digits_study as study

#: Three steps and no corrupted sets instead of the study's budget.
TINY = [
    "--trainer.max_steps=3",
    "--lr_scheduler.init_args.total_steps=3",
    "--trainer.log_every_n_steps=1",
    "--trainer.val_check_interval=3",
    "--data.init_args.eval_shift_severities=false",
]


@pytest.mark.slow
def test_a_study_run_feeds_the_checks_and_the_ood_scores(command_env, tmp_path):
    run = study.StudyRun(
        "signorm", 0, num_estimators=2, tau=study.TAU, diversity_strength=study.LAMBDA
    )
    command = run.command(tmp_path / "runs")
    assert (
        command[0] == "torch-uncertainty"
        and "--routine.init_args.member_lr_multiplier=2" in command
    )
    done = run_command(
        [
            *command[1:],
            *TINY,
            ("--trainer.callbacks+=signorm_lab.callbacks.TestPredictionWriter"),
            "--trainer.callbacks.dataloaders=[0, 1]",
        ],
        cwd=tmp_path,
        env=command_env,
    )
    assert done.returncode == 0, failure(done)

    log_dir = run.log_dir(tmp_path / "runs")
    study.record_run(run, log_dir, seconds=1.0)
    (result,) = find_runs([log_dir])
    assert result.get("num_estimators") == 2 and result.get("tau") == study.TAU
    # The held-out digits are the near-OOD set, scored in results.csv by the routine's MSP.
    scores = analysis.near_ood_aurocs(log_dir)
    assert scores["MSP"] == pytest.approx(100 * result.metrics["ood_near/AUROC"], abs=0.01)
    assert 0 <= scores["MI"] <= 100
    (row,) = analysis.checks([result])
    assert row["run"].endswith("signorm_M2_tau0.1_lambda0.01/seed0")
    assert {"change val/cls/NLL", "change train/signorm_cos", "cos_reg"} <= set(row)
