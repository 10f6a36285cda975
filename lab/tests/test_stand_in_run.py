"""A run on stand-in data does what the stand-in route says: one batch of validation and of each
test set where the overrides say one, and no member health advice (meant for data a model can
learn, not random pixels), one line saying the health warnings are off instead; its results say
it was on stand-ins, whatever marker is removed or data root renamed."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from signorm_lab.cli.stand_in import stand_in_label
from signorm_lab.datamodules.stand_in_data import (
    HEALTH_CHECKS_OFF,
    RUN_LABEL,
    SMOKE_TEST_OVERRIDES,
    STAND_IN_COLUMN,
    write_stand_in,
)
from signorm_lab.reproduction import regression
from signorm_lab.reproduction.runs import read_results
from torch_uncertainty_signorm.routines.health_warnings import HealthWarnings
from torch_uncertainty_signorm.routines.member_health import WARNING_PREFIX, HealthCondition

RECIPE = Path(__file__).resolve().parents[2] / "experiments" / "resnet18_c10_signorm.yaml"
NARROW = "--routine.init_args.model.init_args.model.init_args.width_multiplier=0.125"
AT_CHANCE = HealthCondition("chance_accuracy", 0, 0.1, 0.11)


def _health_advice(records) -> list[str]:
    return [str(r.message) for r in records if str(r.message).startswith(WARNING_PREFIX)]


def _report(warnings: HealthWarnings) -> None:
    """Two validations, the end of fit and a test that each find member 0 at chance."""
    warnings.start_fit()
    warnings.validated([AT_CHANCE], 2)
    warnings.validated([AT_CHANCE], 4)
    warnings.end_fit()
    warnings.tested([AT_CHANCE], 4)


def test_the_stand_in_label_turns_health_advice_off_and_says_so_once(recwarn, capsys):
    trainer = SimpleNamespace(is_global_zero=True)
    routine = SimpleNamespace(health_warnings=HealthWarnings())
    label = stand_in_label("standin")
    for stage in ("fit", "test"):  # fit, then the test of eval_after_fit: one line
        label.setup(trainer, routine, stage)
    _report(routine.health_warnings)
    assert _health_advice(recwarn) == []
    assert capsys.readouterr().err.count(HEALTH_CHECKS_OFF) == 1
    label.setup(trainer, SimpleNamespace(), "fit")  # a routine without health warnings: nothing


def test_health_advice_is_given_without_the_stand_in_label(recwarn):
    _report(HealthWarnings())
    (advice,) = _health_advice(recwarn)  # once per (condition, member) and run
    assert "member 0 is at chance accuracy" in advice


@pytest.mark.slow
def test_a_stand_in_fit_runs_one_batch_and_gives_no_health_advice(
    tmp_path, monkeypatch, recwarn, capsys
):
    """The overrides signorm-standin-data prints, through the command's parser and trainer: one
    validation batch (and one sanity-check batch), one batch of each test set, no advice."""
    from signorm_lab.cli import cli_main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["torch-uncertainty"])
    write_stand_in(tmp_path / "standin")
    cli = cli_main(
        [
            "fit",
            "--config",
            str(RECIPE),
            "--data.init_args.root=standin",
            *SMOKE_TEST_OVERRIDES,
            NARROW,
        ]
    )
    trainer = cli.trainer
    assert trainer.num_val_batches == [1] and trainer.num_sanity_val_batches == [1]
    assert trainer.num_test_batches and set(trainer.num_test_batches) == {1}  # eval_after_fit
    assert len(trainer.num_test_batches) >= 2  # CIFAR-10's test set and SVHN's (eval_ood)
    assert _health_advice(recwarn) == []
    console = capsys.readouterr()
    assert (console.out + console.err).count(HEALTH_CHECKS_OFF) == 1
    (results,) = (tmp_path / "logs").rglob("results.csv")
    assert read_results(results)[STAND_IN_COLUMN] == 1
    (results.parent / RUN_LABEL).unlink()
    (tmp_path / "standin").rename(tmp_path / "renamed")
    (tmp_path / "ref.csv").write_text("method,Acc\nref,10.0\n")
    with pytest.raises(SystemExit):
        regression.main([str(results.parent), "--reference", "ref.csv", "--tol", "Acc=100"])
    assert "used stand-in data" in capsys.readouterr().err
