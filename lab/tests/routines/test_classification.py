"""The σN-Ens routine's test row in ``results.csv`` on real digits, next to TorchUncertainty's
metrics (the metrics themselves: the method's tests/routines/test_classification.py)."""

import csv

import pytest
import torch
from lightning.pytorch.loggers import CSVLogger

from fixtures.digits import cpu_trainer, digits_signorm_routine
from signorm_lab.datamodules import DigitsDataModule


@pytest.mark.slow
def test_test_metrics_land_in_results_csv_next_to_torch_uncertainty_metrics(tmp_path):
    torch.manual_seed(0)
    routine = digits_signorm_routine(save_to_csv=True, eval_ood=True)
    trainer = cpu_trainer(max_epochs=1, logger=CSVLogger(tmp_path), limit_train_batches=3)
    datamodule = DigitsDataModule(batch_size=64, eval_ood=True)
    trainer.fit(routine, datamodule)
    trainer.test(routine, datamodule, verbose=False)
    (csv_path,) = tmp_path.rglob("results.csv")
    with csv_path.open() as file:
        (row,) = list(csv.DictReader(file))
    for key in (
        "test/cls/Acc",
        "ood/AUROC",
        "test/ens_MI",
        "test/div/signorm_cos",
        "test/div/signorm_cos_regularized",
        "test/div/jensen_gap",
        "test/div/geometric_ambiguity",
        "test/health/dead_members",
        *(f"test/member_{m}/{name}" for m in range(4) for name in ("Acc", "NLL")),
    ):
        assert row[key] != "", key
    assert 0 < float(row["test/member_3/Acc"]) <= 1  # a fraction, as test/cls/Acc
    # the mutual information (modulation uncertainty) is TorchUncertainty's, logged once
    assert "test/div/MI" not in row
    assert 0 < float(row["test/div/signorm_cos"]) <= 1
