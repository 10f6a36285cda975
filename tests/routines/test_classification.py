"""SigmaNormClassificationRoutine on real digits: the regulariser, its logs, its groups."""

import csv

import pytest
import torch
from lightning.pytorch.loggers import CSVLogger
from torch import nn

from fixtures.backbones import tiny_resnet
from fixtures.digits import cpu_trainer, digits_signorm_routine
from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.datamodules import DigitsDataModule
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine


def test_scale_logits_get_their_own_group_at_100x_without_weight_decay():
    routine = digits_signorm_routine()  # base lr 0.05
    optimizer = routine.configure_optimizers()
    base, scales = optimizer.param_groups
    assert scales["lr"] == pytest.approx(5.0) and scales["weight_decay"] == 0.0
    assert base["lr"] == 0.05 and base["weight_decay"] == 5e-4
    scale_ids = {id(p) for p in routine.model.scale_logits()}
    assert {id(p) for p in scales["params"]} == scale_ids
    all_ids = [id(p) for p in routine.parameters()]
    assert sorted(all_ids) == sorted(id(p) for g in optimizer.param_groups for p in g["params"])


def test_training_loss_is_task_loss_plus_lambda_diversity_term():
    routine = digits_signorm_routine(diversity_strength=0.3)
    routine.log = lambda *args, **kwargs: None  # logging needs a running loop
    inputs, targets = torch.randn(6, 1, 8, 8), torch.randint(0, 10, (6,))
    torch.manual_seed(0)
    loss = routine.training_step((inputs, targets))
    logits = routine.model(inputs)
    expected = nn.functional.cross_entropy(logits, targets.repeat(4))
    expected = expected + routine.model.diversity_loss()
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-5)
    assert routine.model.diversity_loss() < 0  # sum of log-shares, scaled by λ > 0


@pytest.mark.slow
def test_low_temperature_lowers_signorm_cos_on_real_digits():
    """τ is the control: 3 epochs at τ = 0.1 end with far more diverse members than τ = 10."""
    cosines, gaps = {}, {}
    for tau in (0.1, 10.0):
        torch.manual_seed(0)
        routine = digits_signorm_routine(tau=tau)
        trainer = cpu_trainer(max_epochs=3)
        datamodule = DigitsDataModule(batch_size=64)
        trainer.fit(routine, datamodule)
        results = trainer.validate(routine, datamodule, verbose=False)[0]
        assert results["val/cls/Acc"] > 0.85
        cosines[tau] = results["val/div/signorm_cos_regularized"]
        gaps[tau] = results["val/div/jensen_gap"]
    assert cosines[0.1] < cosines[10.0] - 0.3, cosines
    assert gaps[0.1] > gaps[10.0], gaps  # more parameter diversity, more output diversity


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
    for key in ("test/cls/Acc", "ood/AUROC", "test/ens_MI", "test/div/signorm_cos",
                "test/div/signorm_cos_regularized", "test/div/jensen_gap", "test/div/MI",
                "test/div/geometric_ambiguity"):
        assert row[key] != "", key
    # the routine's MI (modulation uncertainty) is TorchUncertainty's ensemble MI
    assert float(row["test/div/MI"]) == pytest.approx(float(row["test/ens_MI"]), abs=2e-3)
    assert 0 < float(row["test/div/signorm_cos"]) <= 1


def test_optimizer_without_groups_is_warned_about():
    routine = digits_signorm_routine()
    routine.optim_recipe = torch.optim.SGD(routine.parameters(), lr=0.01)
    trainer = cpu_trainer(max_epochs=1, limit_train_batches=1, limit_val_batches=0)
    with pytest.warns(UserWarning, match="share an optimizer group"):
        trainer.fit(routine, DigitsDataModule(batch_size=32))


def test_bad_routine_arguments_name_the_value():
    with pytest.raises(TypeError, match="trains a SigmaNormEnsemble.*got _ResNet"):
        SigmaNormClassificationRoutine(tiny_resnet(), 10, nn.CrossEntropyLoss())
    model = signorm_ensemble(tiny_resnet(), 2)
    with pytest.raises(ValueError, match="scale_lr_multiplier must be a finite number > 0, got 0"):
        SigmaNormClassificationRoutine(model, 10, nn.CrossEntropyLoss(), scale_lr_multiplier=0)
