"""OODShiftEvaluation end to end: trainer.test on local benchmark-format files logs near/far OOD
and per-severity shift metrics, with TorchUncertainty's and the σNorm routine."""

import csv
import math
from pathlib import Path

import pytest
import torch
import yaml
from lightning.pytorch.loggers import CSVLogger
from sklearn.metrics import roc_auc_score
from torch import nn
from torch_uncertainty.routines import ClassificationRoutine
from torchvision.transforms import v2

from fixtures.backbones import tiny_resnet
from fixtures.benchmark_files import (
    IntensityClassifier,
    class_intensity,
    ood_intensity,
    write_dtd,
    write_image_folder,
    write_imagenet_c,
    write_imagenet_val,
    write_inaturalist,
)
from fixtures.digits import cpu_trainer
from signorm_lab.callbacks import OODShiftEvaluation
from signorm_lab.cli import cli_main
from signorm_lab.datamodules import ImageNetOODShiftDataModule
from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine


def routine_hooks(model: nn.Module) -> dict:
    return dict(model._forward_hooks)


WNIDS = ["n01440764", "n01443537", "n01484850", "n01491361"]
CORRUPTIONS = ["fog", "snow"]
TO_UNIT = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])


@pytest.fixture
def imagenet_root(tmp_path):
    """ImageNet val, ImageNet-C and the five ImageNet OOD sets, 4 classes, 8x8 grey images.

    Far sets hold only ambiguous images (between classes 0 and 1); near sets half class-like,
    half ambiguous. At severity s, s - 1 of the 16 images of each corruption are misread.
    """
    classes, ambiguous = len(WNIDS), ood_intensity(len(WNIDS))
    class_like = [class_intensity(c, classes) for c in range(classes)]
    write_imagenet_val(tmp_path, WNIDS, per_class=2)
    write_imagenet_c(tmp_path, CORRUPTIONS, WNIDS, {s: s - 1 for s in range(1, 6)}, per_class=4)
    write_image_folder(tmp_path / "ssb_hard", [*class_like, *[ambiguous] * 4])
    write_image_folder(tmp_path / "ninco", [*class_like[:2], ambiguous, ambiguous])
    write_inaturalist(tmp_path, [ambiguous] * 3)
    write_dtd(tmp_path, [ambiguous] * 3)
    write_image_folder(tmp_path / "openimage-o" / "ood", [ambiguous] * 2, classes=1)
    return tmp_path


def _datamodule(root, **kwargs):
    return ImageNetOODShiftDataModule(
        root,
        batch_size=4,
        eval_near_far_ood=True,
        eval_shift_severities=True,
        corruptions=CORRUPTIONS,
        test_transform=TO_UNIT,
        num_workers=0,
        pin_memory=False,
        persistent_workers=False,
        **kwargs,
    )


def test_trainer_test_logs_near_far_and_every_severity(imagenet_root):
    model = IntensityClassifier(len(WNIDS), num_estimators=3)  # identical members, member-major
    routine = ClassificationRoutine(
        model,
        num_classes=len(WNIDS),
        loss=nn.CrossEntropyLoss(),
        is_ensemble=True,
        save_to_csv=True,
    )
    trainer = cpu_trainer(
        logger=CSVLogger(imagenet_root / "logs"), callbacks=[OODShiftEvaluation()]
    )
    trainer.test(routine, datamodule=_datamodule(imagenet_root))
    logged = {k: float(v) for k, v in trainer.callback_metrics.items()}
    c = 1 / (1 + 2 * math.exp(-2) + math.exp(-4))  # logits (0, -2, -2, -4) at sharpness 4

    assert logged["test/cls/Acc"] == 1.0  # the routine still scores the clean set
    for name in ("iNaturalist", "Textures", "OpenImage-O"):
        assert logged[f"ood_far/{name}/AUROC"] == 1.0 and logged[f"ood_far/{name}/FPR95"] == 0.0
    assert logged["ood_far/AUROC"] == 1.0 and logged["ood_far/AUPR"] == 1.0
    # near: half of each set ties with the clean images (AUROC counts ties 1/2) -> 0.75
    assert logged["ood_near/SSB-hard/AUROC"] == pytest.approx(0.75)
    assert logged["ood_near/NINCO/AUROC"] == pytest.approx(0.75)
    assert logged["ood_near/AUROC"] == pytest.approx(0.75)
    assert logged["ood_near/FPR95"] == 1.0  # 95% recall needs the tied scores: all ID flagged

    for severity in range(1, 6):
        misread = (severity - 1) / 16
        assert logged[f"shift/s{severity}/Acc"] == pytest.approx(1 - misread)
        # every image is read with the same confidence c, right or wrong: one calibration bin
        assert logged[f"shift/s{severity}/ECE"] == pytest.approx(abs(1 - misread - c), abs=1e-5)
        # -log p(target): -log c when right, -log(c e^-2) when read as the adjacent class
        assert logged[f"shift/s{severity}/NLL"] == pytest.approx(-math.log(c) + 2 * misread)
    assert logged["shift/mean/Acc"] == pytest.approx(1 - 10 / 16 / 5)

    csv_path = next((imagenet_root / "logs").rglob("results.csv"))
    with csv_path.open() as file:
        row = list(csv.DictReader(file))[-1]
    assert float(row["ood_near/AUROC"]) == pytest.approx(0.75)
    assert float(row["shift/s5/Acc"]) == pytest.approx(0.75)
    assert "test/cls/Acc" in row


def test_signorm_routine_scores_match_an_independent_computation(imagenet_root):
    torch.manual_seed(0)
    ensemble = signorm_ensemble(tiny_resnet(num_classes=len(WNIDS)), num_estimators=2)
    routine = SigmaNormClassificationRoutine(
        ensemble, num_classes=len(WNIDS), loss=nn.CrossEntropyLoss()
    )
    callback = OODShiftEvaluation()
    datamodule = _datamodule(imagenet_root, shift_severities=[2])
    trainer = cpu_trainer(callbacks=[callback])
    trainer.test(routine, datamodule=datamodule)

    def msp(loader):
        with torch.no_grad():
            logits = torch.cat(
                [
                    ensemble.eval()(images).unflatten(0, (2, -1)).transpose(0, 1)
                    for images, _ in loader
                ]
            )
        return logits.softmax(-1).mean(1).max(-1).values

    loaders = datamodule.test_dataloader()
    clean, textures = msp(loaders[0]), msp(loaders[4])
    labels = [0] * len(clean) + [1] * len(textures)
    expected = roc_auc_score(labels, torch.cat([-clean, -textures]).numpy())
    assert float(callback.results["ood_far/Textures/AUROC"]) == pytest.approx(expected, abs=1e-6)
    assert set(callback.results) >= {
        "ood_near/AUROC",
        "ood_far/FPR95",
        "shift/s2/ECE",
        "shift/mean/NLL",
    }
    assert "test/div/jensen_gap" in trainer.callback_metrics  # the routine's own logs remain


def test_misconfigurations_raise_before_testing(imagenet_root):
    model = IntensityClassifier(len(WNIDS))
    with pytest.raises(ValueError, match="eval_ood and eval_shift to False"):
        routine = ClassificationRoutine(
            model, num_classes=4, loss=nn.CrossEntropyLoss(), eval_ood=True
        )
        cpu_trainer(callbacks=[OODShiftEvaluation()]).test(
            routine, datamodule=_datamodule(imagenet_root)
        )
    from fixtures.synthetic_datamodule import SyntheticDataModule

    routine = ClassificationRoutine(
        nn.Sequential(nn.Flatten(), nn.Linear(3072, 10)), num_classes=10
    )
    with pytest.raises(
        TypeError, match=r"needs a datamodule with `eval_sets`.*SyntheticDataModule"
    ):
        cpu_trainer(callbacks=[OODShiftEvaluation()]).test(
            routine, datamodule=SyntheticDataModule()
        )
    with pytest.raises(ValueError, match="num_bins must be an integer >= 1, got 0"):
        OODShiftEvaluation(num_bins=0)


def test_command_runs_the_evaluation_overlay(imagenet_root, monkeypatch, capsys):
    """``torch-uncertainty test --config <overlay>``: the overlay swaps in the datamodule and the
    callback; the routine's eval_ood/eval_shift are forwarded off."""
    monkeypatch.chdir(imagenet_root)
    local = imagenet_root / "local.yaml"
    local.write_text(
        yaml.safe_dump(
            {
                "routine": {
                    "class_path": "torch_uncertainty.routines.ClassificationRoutine",
                    "init_args": {
                        "num_classes": 4,
                        "model": {
                            "class_path": "fixtures.benchmark_files.IntensityClassifier",
                            "init_args": {"num_classes": 4},
                        },
                    },
                },
                "data": {
                    "init_args": {
                        "root": str(imagenet_root),
                        "batch_size": 4,
                        "num_workers": 0,
                        "pin_memory": False,
                        "persistent_workers": False,
                        "corruptions": CORRUPTIONS,
                        "shift_severities": [1, 5],
                        "test_transform": {
                            "class_path": "torchvision.transforms.v2.Compose",
                            "init_args": {
                                "transforms": [
                                    {"class_path": "torchvision.transforms.v2.ToImage"},
                                    {
                                        "class_path": "torchvision.transforms.v2.ToDtype",
                                        "init_args": {"dtype": "torch.float32", "scale": True},
                                    },
                                ]
                            },
                        },
                    }
                },
                "trainer": {"accelerator": "cpu", "logger": False, "enable_progress_bar": False},
            }
        )
    )
    overlay = Path(__file__).parents[3] / "experiments" / "eval" / "imagenet_ood_shift.yaml"
    cli = cli_main(["test", "--config", str(overlay), "--config", str(local)])
    assert isinstance(cli.datamodule, ImageNetOODShiftDataModule)
    logged = cli.trainer.callback_metrics
    assert float(logged["ood_far/AUROC"]) == 1.0
    assert float(logged["ood_near/AUROC"]) == pytest.approx(0.75)
    assert float(logged["shift/s5/Acc"]) == pytest.approx(0.75)
    assert "shift/s2/Acc" not in logged
    # TorchUncertainty's printing would raise a KeyError on shift/* keys without shift/severity
    printed = capsys.readouterr().out
    assert "Near / far OOD detection" in printed and "OpenImage-O" in printed
    assert "Corruption shift" in printed
    assert len(routine_hooks(cli.routine.model)) == 0  # the forward hook is gone


@pytest.mark.parametrize(
    ("recipe", "overlay"), [("wrn_c100_signorm", "c100"), ("resnet18_c10_packed", "c10")]
)
def test_overlays_keep_the_recipe_data_arguments(recipe, overlay, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    experiments = Path(__file__).parents[3] / "experiments"
    cli = cli_main(
        [
            "--config",
            str(experiments / f"{recipe}.yaml"),
            "--config",
            str(experiments / "eval" / f"{overlay}_ood_shift.yaml"),
            "--trainer.accelerator=cpu",
            "--trainer.precision=32",
        ],
        run=False,
    )
    datamodule = cli.datamodule
    assert type(datamodule).__name__ == f"CIFAR{overlay[1:]}OODShiftDataModule"
    assert datamodule.batch_size == 128 and str(datamodule.root) == "data"
    assert datamodule.eval_near_far_ood and datamodule.eval_shift_severities
    assert len(datamodule._planned_sets()) == 6 + 5 * 15
    assert any(isinstance(c, OODShiftEvaluation) for c in cli.trainer.callbacks)
    assert not cli.routine.eval_ood and not cli.routine.eval_shift
    # The recipe's eval_ood: true is turned off by the overlay, its results.csv kept.
    assert not datamodule.eval_ood and datamodule.download and cli.routine.save_to_csv
