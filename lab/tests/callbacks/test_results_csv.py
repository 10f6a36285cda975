"""ResultsCSVCallback completes TorchUncertainty's results.csv row (σN-Ens's test values, the
steps taken) and never lets the row land outside the run."""

from __future__ import annotations

import csv
import os
from types import SimpleNamespace

import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from torch import nn

from fixtures.backbones import tiny_resnet
from fixtures.digits import cpu_trainer
from fixtures.synthetic_datamodule import SyntheticDataModule
from signorm_lab.callbacks import ResultsCSVCallback
from signorm_lab.evaluation.results_csv import append_to_last_row
from signorm_lab.reproduction.runs import TRAINED_STEPS_COLUMN, trained_steps
from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine

PROFILE = b"test/cls/Acc\n0.9000\n"


def _routine(**kwargs) -> SigmaNormClassificationRoutine:
    return SigmaNormClassificationRoutine(
        signorm_ensemble(tiny_resnet(), 2),
        loss=nn.CrossEntropyLoss(),
        optim_recipe=lambda model: torch.optim.SGD(model.parameters(), lr=0.01),
        save_to_csv=True,
        **kwargs,
    )


def _rows(folder) -> list[dict[str, str]]:
    (path,) = folder.rglob("results.csv")
    with path.open() as file:
        return list(csv.DictReader(file))


def test_the_row_gets_the_routines_test_values_and_the_steps_taken(tmp_path):
    torch.manual_seed(0)
    routine, data = _routine(eval_ood=True), SyntheticDataModule(eval_ood=True)
    trainer = cpu_trainer(logger=CSVLogger(tmp_path), callbacks=[ResultsCSVCallback()])
    trainer.fit(routine, data)
    trainer.test(routine, data, verbose=False)
    (row,) = _rows(tmp_path)
    for key in (
        "test/cls/Acc",  # TorchUncertainty's, in the same row
        "ood/AUROC",
        "test/ens_MI",
        "test/div/signorm_cos",
        "test/div/signorm_cos_regularized",
        "test/div/jensen_gap",
        "test/div/geometric_ambiguity",
        "test/health/dead_members",
        *(f"test/member_{m}/{name}" for m in range(2) for name in ("Acc", "NLL")),
    ):
        assert row[key] != "", key
    assert 0 <= float(row["test/member_1/Acc"]) <= 1  # a fraction, as test/cls/Acc
    assert "test/div/MI" not in row  # the mutual information is TorchUncertainty's ens_MI
    assert float(row[TRAINED_STEPS_COLUMN]) == trainer.global_step == 2


@pytest.mark.slow
def test_trained_steps_are_the_steps_taken_not_the_last_checkpoints(tmp_path):
    """3 steps checkpointed at step 2: the fit's row says 3; a test of that checkpoint by a new
    trainer (no step of its own) says 2."""
    torch.manual_seed(0)
    data = SyntheticDataModule(num_samples=12)
    checkpoints = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=2, save_top_k=-1)
    trainer = cpu_trainer(
        max_steps=3,
        limit_val_batches=0,
        logger=CSVLogger(tmp_path / "fit"),
        callbacks=[checkpoints, ResultsCSVCallback()],
        enable_checkpointing=True,
    )
    routine = _routine()
    trainer.fit(routine, data)
    trainer.test(routine, data, verbose=False)
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["epoch=0-step=2.ckpt"]
    assert float(_rows(tmp_path / "fit")[-1][TRAINED_STEPS_COLUMN]) == 3
    (run,) = {p.parent for p in (tmp_path / "fit").rglob("results.csv")}
    assert trained_steps(run) == 3

    tester = cpu_trainer(logger=CSVLogger(tmp_path / "test"), callbacks=[ResultsCSVCallback()])
    tester.test(
        _routine(), data, ckpt_path=tmp_path / "ckpt" / "epoch=0-step=2.ckpt", verbose=False
    )
    assert float(_rows(tmp_path / "test")[-1][TRAINED_STEPS_COLUMN]) == 2


@pytest.mark.parametrize("link", ["hard", "symbolic"])
def test_a_linked_results_csv_is_left_as_it_is(link, tmp_path):
    """TorchUncertainty would append its row through the link, into the file outside the run:
    its writing is off for this test, and on again after it."""
    outside, run = tmp_path / "other_run.csv", tmp_path / "run"
    outside.write_bytes(PROFILE)
    run.mkdir()
    if link == "hard":
        os.link(outside, run / "results.csv")
    else:
        (run / "results.csv").symlink_to(outside)
    routine = SimpleNamespace(
        save_to_csv=True, csv_filename="results.csv", logger=SimpleNamespace(log_dir=str(run))
    )
    trainer = SimpleNamespace(ckpt_path=None, global_step=0, is_global_zero=True)
    callback = ResultsCSVCallback()
    with pytest.warns(
        UserWarning, match=rf"is a {link} link.*: the test results were not written to it"
    ):
        callback.on_test_start(trainer, routine)
    assert routine.save_to_csv is False
    callback.on_test_end(trainer, routine)
    assert routine.save_to_csv is True
    assert outside.read_bytes() == PROFILE


def test_a_csv_filename_leading_out_of_the_run_is_refused(tmp_path):
    routine = SimpleNamespace(
        save_to_csv=True, csv_filename="../results.csv", logger=SimpleNamespace(log_dir=tmp_path)
    )
    with pytest.raises(ValueError, match=r"csv_filename='\.\./results\.csv' is not a plain file"):
        ResultsCSVCallback().on_test_start(SimpleNamespace(ckpt_path=None), routine)


def test_a_row_written_by_another_test_meanwhile_is_not_completed(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text("test/cls/Acc\n0.9000\n0.8000\n")
    with pytest.warns(UserWarning, match=r"holds 2 rows where this test's row would be row 1"):
        append_to_last_row(path, {"test/div/jensen_gap": 0.5}, run_dir=tmp_path, rows=1)
    assert path.read_text() == "test/cls/Acc\n0.9000\n0.8000\n"
