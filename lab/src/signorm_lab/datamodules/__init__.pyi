from .digits import DigitsDataModule as DigitsDataModule
from .ood_shift import CIFAR10OODShiftDataModule as CIFAR10OODShiftDataModule
from .ood_shift import CIFAR100OODShiftDataModule as CIFAR100OODShiftDataModule
from .ood_shift import ImageNetOODShiftDataModule as ImageNetOODShiftDataModule
from .sst2 import SST2DataModule as SST2DataModule
from .tweets import TweetsDataModule as TweetsDataModule
