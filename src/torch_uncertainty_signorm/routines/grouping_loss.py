"""TorchUncertainty's grouping loss for a σN-Ens routine, whose features are one row per input."""

from __future__ import annotations

from torch_uncertainty.metrics import GroupingLoss
from torch_uncertainty.routines import ClassificationRoutine
from torchmetrics import MetricCollection

__all__ = ["evaluate_grouping_loss"]


def evaluate_grouping_loss(routine: ClassificationRoutine) -> None:
    """Set up the metrics TorchUncertainty's steps update and log for the grouping loss of the
    ensemble's mean probabilities, on every member's features of each input (the wrapper's
    ``feats_forward``, ``(B, M·D)``).

    TorchUncertainty 0.13 refuses ``eval_grouping_loss`` for ensembles, whose features it
    expects as ``M·B`` rows; σN-Ens gives one row per input.
    """
    routine.eval_grouping_loss = True
    grouping_loss = MetricCollection({"cls/grouping_loss": GroupingLoss()})
    routine.val_grouping_loss = grouping_loss.clone(prefix="val/")
    routine.test_grouping_loss = grouping_loss.clone(prefix="test/")
