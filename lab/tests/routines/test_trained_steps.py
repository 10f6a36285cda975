"""``results.csv`` records the optimizer steps the run took (``train/trained_steps``), whatever
step its last checkpoint was saved at, and a test of a checkpoint records that checkpoint's."""

from __future__ import annotations

import csv

import pytest
import torch
from fixtures.digits import cpu_trainer, digits_signorm_routine
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from signorm_lab.datamodules import DigitsDataModule
from signorm_lab.reproduction.runs import TRAINED_STEPS_COLUMN, trained_steps


def _last_row(folder) -> dict[str, str]:
    (path,) = folder.rglob("results.csv")
    with path.open() as file:
        return list(csv.DictReader(file))[-1]


@pytest.mark.slow
def test_trained_steps_are_the_steps_taken_not_the_last_checkpoints(tmp_path):
    torch.manual_seed(0)
    routine = digits_signorm_routine(save_to_csv=True)
    checkpoints = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=4, save_top_k=-1)
    trainer = cpu_trainer(
        max_epochs=1,
        max_steps=6,
        limit_val_batches=0,
        logger=CSVLogger(tmp_path / "fit"),
        callbacks=[checkpoints],
        enable_checkpointing=True,
    )
    datamodule = DigitsDataModule(batch_size=32)
    trainer.fit(routine, datamodule)
    trainer.test(routine, datamodule, verbose=False)
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["epoch=0-step=4.ckpt"]
    assert float(_last_row(tmp_path / "fit")[TRAINED_STEPS_COLUMN]) == 6
    (run,) = {p.parent for p in (tmp_path / "fit").rglob("results.csv")}
    assert trained_steps(run) == 6

    tester = cpu_trainer(logger=CSVLogger(tmp_path / "test"))
    tester.test(
        digits_signorm_routine(save_to_csv=True),
        datamodule,
        ckpt_path=str(tmp_path / "ckpt" / "epoch=0-step=4.ckpt"),
        verbose=False,
    )
    assert float(_last_row(tmp_path / "test")[TRAINED_STEPS_COLUMN]) == 4
