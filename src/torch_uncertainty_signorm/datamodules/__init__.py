"""Datamodules following the API of TorchUncertainty's ``TUDataModule``."""

from .digits import DigitsDataModule

__all__ = ["DigitsDataModule"]
