"""Datamodules following the API of TorchUncertainty's ``TUDataModule``."""

from .digits import DigitsDataModule
from .ood_shift import (
    CIFAR10OODShiftDataModule,
    CIFAR100OODShiftDataModule,
    ImageNetOODShiftDataModule,
)
from .sst2 import SST2DataModule
from .tweets import TweetsDataModule

__all__ = [
    "CIFAR10OODShiftDataModule",
    "CIFAR100OODShiftDataModule",
    "DigitsDataModule",
    "ImageNetOODShiftDataModule",
    "SST2DataModule",
    "TweetsDataModule",
]
