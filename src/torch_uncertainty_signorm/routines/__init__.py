"""Lightning routines for σNorm-Ensembles, built on TorchUncertainty's."""

from .classification import SigmaNormClassificationRoutine

__all__ = ["SigmaNormClassificationRoutine"]
