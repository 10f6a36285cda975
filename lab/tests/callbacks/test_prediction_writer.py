"""TestPredictionWriter: the saved member probabilities are the model's, input by input."""

from __future__ import annotations

import pytest
import torch
from lightning.pytorch.loggers import CSVLogger
from safetensors.torch import load_file

from fixtures.digits import cpu_trainer, digits_signorm_routine
from signorm_lab.callbacks import TestPredictionWriter
from signorm_lab.datamodules import DigitsDataModule
from torch_uncertainty_signorm.evaluation.prediction import member_probabilities

M = 4  # members of the digits fixture


@pytest.mark.slow
def test_saved_probabilities_match_the_model_on_every_test_loader(tmp_path):
    torch.manual_seed(0)
    routine = digits_signorm_routine(save_to_csv=True)
    datamodule = DigitsDataModule(batch_size=64, eval_ood=True)
    trainer = cpu_trainer(
        max_epochs=1,
        limit_train_batches=2,
        limit_val_batches=0,
        logger=CSVLogger(tmp_path, name="", version="run"),
        callbacks=[TestPredictionWriter()],
    )
    trainer.fit(routine, datamodule)
    trainer.test(routine, datamodule, verbose=False)

    saved = load_file(tmp_path / "run" / "test_predictions.safetensors")
    assert sorted(saved) == ["probs/0", "probs/1", "targets/0", "targets/1"]
    routine.model.eval()
    for index, loader in enumerate(datamodule.test_dataloader()):
        inputs, targets = map(torch.cat, zip(*loader, strict=True))
        with torch.no_grad():
            expected = member_probabilities(routine.model(inputs), M)
        assert saved[f"probs/{index}"].shape == (M, len(targets), 10)
        torch.testing.assert_close(saved[f"probs/{index}"], expected, atol=1e-6, rtol=0)
        assert torch.equal(saved[f"targets/{index}"], targets)
    # The routine's own accuracy is the saved mean prediction's.
    accuracy = (saved["probs/0"].mean(0).argmax(-1) == saved["targets/0"]).double().mean()
    assert float(accuracy) == pytest.approx(
        trainer.callback_metrics["test/cls/Acc"].item(), abs=1e-6
    )


def test_a_filename_that_is_not_safetensors_is_refused():
    with pytest.raises(ValueError, match=r"'\.safetensors', got 'preds\.pt'"):
        TestPredictionWriter(filename="preds.pt")


def test_only_the_chosen_loaders_are_saved(tmp_path):
    torch.manual_seed(0)
    routine = digits_signorm_routine(save_to_csv=True)
    datamodule = DigitsDataModule(batch_size=64, eval_ood=True)
    trainer = cpu_trainer(
        max_epochs=1,
        limit_train_batches=1,
        limit_val_batches=0,
        logger=CSVLogger(tmp_path, name="", version="run"),
        callbacks=[TestPredictionWriter(dataloaders=[1])],
    )
    trainer.fit(routine, datamodule)
    trainer.test(routine, datamodule, verbose=False)
    saved = load_file(tmp_path / "run" / "test_predictions.safetensors")
    assert sorted(saved) == ["probs/1", "targets/1"]


@pytest.mark.parametrize("dataloaders", [[], [0, 0], [-1], [True], "0"])
def test_bad_loader_lists_are_refused(dataloaders):
    with pytest.raises(ValueError, match="dataloaders must be a non-empty list"):
        TestPredictionWriter(dataloaders=dataloaders)
