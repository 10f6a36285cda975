"""ParameterCountCallback logs params/trainable and params/total for a plain TU routine."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch
from lightning.pytorch.loggers import CSVLogger
from torch import nn
from torch_uncertainty.routines import ClassificationRoutine
from torch_uncertainty.transforms import RepeatTarget

from fixtures.backbones import tiny_vit
from fixtures.digits import cpu_trainer
from fixtures.synthetic_datamodule import SyntheticDataModule
from signorm_lab.baselines import lora_ensemble
from signorm_lab.callbacks import ParameterCountCallback
from signorm_lab.evaluation.parameter_counts import parameter_counts


def test_counts_reach_the_logger_on_fit_and_test(tmp_path):
    model = lora_ensemble(tiny_vit(), 2, num_classes=10)
    routine = ClassificationRoutine(
        model,
        num_classes=10,
        loss=nn.CrossEntropyLoss(),
        is_ensemble=True,
        format_batch_fn=RepeatTarget(2),
        optim_recipe=lambda m: torch.optim.SGD(m.parameters(), lr=0.01),
    )
    trainer = cpu_trainer(
        max_steps=1,
        limit_val_batches=0,
        logger=CSVLogger(tmp_path, name="counts"),
        callbacks=[ParameterCountCallback()],
    )
    trainer.fit(routine, SyntheticDataModule(batch_size=4))
    expected = {k: v / 1e6 for k, v in parameter_counts(model).items()}
    assert expected["trainable"] < expected["total"]  # the frozen backbone is counted in total
    for key, value in expected.items():
        assert float(trainer.callback_metrics[f"params/{key}"]) == pytest.approx(value)
    trainer.test(routine, SyntheticDataModule(batch_size=4))
    with (Path(trainer.logger.log_dir) / "metrics.csv").open(newline="") as file:
        rows = [row for row in csv.DictReader(file) if row.get("params/total")]
    assert len(rows) == 2  # once at fit start, once at test start
    assert float(rows[0]["params/trainable"]) == pytest.approx(expected["trainable"], rel=1e-6)
