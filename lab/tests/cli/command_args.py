"""What the command's tests share: the offline arguments, the recipes and test routines."""

from __future__ import annotations

from pathlib import Path

import torch
from lightning.pytorch import LightningModule
from torch import nn
from torch_uncertainty.routines import ClassificationRoutine

from fixtures.synthetic_datamodule import SyntheticDataModule

EXPERIMENTS = Path(__file__).parents[3] / "experiments"
SYNTHETIC = f"{SyntheticDataModule.__module__}.SyntheticDataModule"
# Smallest width keeping the ResNet structure: stem 64 * 0.125 = 8 channels, stages 8/16/32/64.
NARROW = "--routine.init_args.model.init_args.width_multiplier=0.125"
CPU = ["--trainer.accelerator=cpu", "--trainer.devices=1", "--trainer.precision=32"]
ROUTINE = "torch_uncertainty.routines.ClassificationRoutine"
SIGNORM_RECIPE = str(EXPERIMENTS / "resnet18_c10_signorm.yaml")
SIGNORM_ROUTINE = "torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine"
SIGNORM_NARROW = "--routine.init_args.model.init_args.model.init_args.width_multiplier=0.125"


def routine_args(routine: str = ROUTINE, **data_args) -> list[str]:
    args = [
        f"--routine={routine}",
        "--routine.init_args.model=torch.nn.Linear",
        "--routine.init_args.model.init_args.in_features=3",
        "--routine.init_args.model.init_args.out_features=10",
        f"--data={SYNTHETIC}",
        "--data.init_args.batch_size=4",
    ]
    if routine == ROUTINE:
        args.append("--routine.init_args.num_classes=10")
    return args + [f"--data.init_args.{k}={str(v).lower()}" for k, v in data_args.items()]


def signorm_args(*extra: str) -> list[str]:
    return [
        "--config",
        SIGNORM_RECIPE,
        f"--data={SYNTHETIC}",
        "--data.init_args.batch_size=4",
        "--data.init_args.num_workers=0",
        SIGNORM_NARROW,
        *CPU,
        *extra,
    ]


def crafted_checkpoint(tmp_path: Path, hyper_parameters: dict) -> str:
    path = tmp_path / "crafted.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": hyper_parameters}, path)
    return str(path)


def class_path_of(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class PlainRoutine(LightningModule):
    """A routine taking none of the forwarded arguments."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model


class HParamsRoutine(ClassificationRoutine):
    """A routine saving its arguments, as Lightning's load_from_checkpoint needs."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.save_hyperparameters()
