"""Near- and far-OOD detection metrics: one binary problem per OOD set, averaged per group."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch_uncertainty.metrics import FPR95
from torchmetrics import MetricCollection
from torchmetrics.classification import BinaryAUROC, BinaryAveragePrecision

from .eval_sets import OOD_GROUPS, OOD_METRICS, ood_metric_name

__all__ = ["NearFarOODMetrics"]


def _detection_metrics() -> MetricCollection:
    # The collection of TorchUncertainty's routine (its `ood/` metrics), OOD as the positive class.
    return MetricCollection(
        {"AUROC": BinaryAUROC(), "AUPR": BinaryAveragePrecision(), "FPR95": FPR95(pos_label=1)},
        compute_groups=[["AUROC", "AUPR"], ["FPR95"]],
    )


class NearFarOODMetrics(nn.Module):
    r"""AUROC, AUPR and FPR95 of each OOD set against the in-distribution test set, per group.

    Each OOD set is its own detection problem (in-distribution samples labelled 0, the set's
    samples 1), scored with TorchUncertainty's metric classes as its routine scores its single
    OOD set; a group's value is the unweighted mean over its sets, as OpenOOD v1.5 reports
    near- and far-OOD:

    .. math::
        \mathrm{AUROC}_{\text{near}} = \frac{1}{|\mathcal{S}_{\text{near}}|}
        \sum_{S \in \mathcal{S}_{\text{near}}} \mathrm{AUROC}(D_{\text{test}}, S).

    Scores follow TorchUncertainty's OOD criteria: higher means "more OOD" (the default MSP
    criterion returns :math:`-\max_c \bar p_c`).

    Args:
        sets: ``(group, name)`` per OOD set, ``group`` in ``("near", "far")``.

    Raises:
        ValueError: If ``sets`` is empty, a group is unknown, or a set appears twice.

    Example:
        >>> metrics = NearFarOODMetrics([("near", "CIFAR100"), ("far", "SVHN")])
        >>> metrics.update_id(torch.tensor([-0.9, -0.8]))
        >>> metrics.update_ood("far", "SVHN", torch.tensor([-0.3, -0.2]))
        >>> metrics.update_ood("near", "CIFAR100", torch.tensor([-0.85, -0.4]))
        >>> float(metrics.compute()["ood_far/SVHN/AUROC"])
        1.0
    """

    def __init__(self, sets: Sequence[tuple[str, str]]) -> None:
        super().__init__()
        sets = [tuple(entry) for entry in sets]
        if not sets:
            raise ValueError(
                "NearFarOODMetrics needs at least one (group, name) OOD set, got none."
            )
        for group, name in sets:
            if group not in OOD_GROUPS:
                raise ValueError(
                    f"Unknown OOD group {group!r} for set {name!r}; valid groups: {OOD_GROUPS}."
                )
        duplicates = sorted({f"{g}/{n}" for g, n in sets if sets.count((g, n)) > 1})
        if duplicates:
            raise ValueError(f"OOD sets listed more than once: {duplicates}.")
        self.sets: list[tuple[str, str]] = sets
        self.per_set = nn.ModuleList(_detection_metrics() for _ in sets)
        self._seen = [False] * len(sets)

    def _index(self, group: str, name: str) -> int:
        try:
            return self.sets.index((group, name))
        except ValueError:
            raise ValueError(
                f"Unknown OOD set {group}/{name}; this evaluation has {self.sets}."
            ) from None

    def update_id(self, scores: Tensor) -> None:
        """Add in-distribution scores (label 0) to every set's detection problem."""
        negatives = torch.zeros_like(scores, dtype=torch.long)
        for metrics in self.per_set:
            metrics.update(scores, negatives)

    def update_ood(self, group: str, name: str, scores: Tensor) -> None:
        """Add the scores of one batch of the OOD set ``group/name`` (label 1)."""
        index = self._index(group, name)
        self.per_set[index].update(scores, torch.ones_like(scores, dtype=torch.long))
        self._seen[index] = True

    def compute(self) -> dict[str, Tensor]:
        """Per-set metrics (``ood_far/SVHN/AUROC``...) and group means (``ood_far/AUROC``...).

        Raises:
            RuntimeError: If a set received no OOD scores.
        """
        missing = [
            f"{g}/{n}" for (g, n), seen in zip(self.sets, self._seen, strict=True) if not seen
        ]
        if missing:
            raise RuntimeError(f"No OOD scores were received for {missing}.")
        results: dict[str, Tensor] = {}
        for (group, name), metrics in zip(self.sets, self.per_set, strict=True):
            for metric, value in metrics.compute().items():
                results[ood_metric_name(group, metric, name)] = value
        for group in OOD_GROUPS:
            names = [name for g, name in self.sets if g == group]
            for metric in OOD_METRICS if names else ():
                values = [results[ood_metric_name(group, metric, name)] for name in names]
                results[ood_metric_name(group, metric)] = torch.stack(values).float().mean()
        return results

    def reset(self) -> None:
        """Forget every score (called after each test epoch)."""
        for metrics in self.per_set:
            metrics.reset()
        self._seen = [False] * len(self.sets)
