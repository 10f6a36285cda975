"""Accuracy, NLL and ECE under corruption, per severity, averaged over the corruption types."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch_uncertainty.metrics import CalibrationError, CategoricalNLL
from torchmetrics import Accuracy, MetricCollection

from .eval_sets import SEVERITIES, SHIFT_METRICS, check_severities, shift_metric_name

__all__ = ["SeverityShiftMetrics"]


class SeverityShiftMetrics(nn.Module):
    r"""Acc, NLL and ECE of each (corruption, severity) set, averaged over corruptions.

    Following Hendrycks & Dietterich (2019) and the per-severity tables of the paper, a metric
    is computed on each corruption at severity :math:`s` and then averaged over the
    corruptions :math:`\mathcal{C}`:

    .. math::
        \mathrm{ECE}_s = \frac{1}{|\mathcal{C}|} \sum_{c \in \mathcal{C}}
        \mathrm{ECE}\big(D_{c,s}\big),

    which for ECE differs from pooling the corruptions into one set. ``shift/mean/*`` is the
    mean over the evaluated severities. Metric classes are TorchUncertainty's (``Accuracy``,
    ``CategoricalNLL``, ``CalibrationError``, L1 with ``num_bins`` equal-width bins), values are
    fractions as TorchUncertainty logs them.

    Args:
        num_classes: Number of classes of the predicted distributions.
        corruptions: The corruption names averaged over (e.g. the 15 benchmark corruptions).
        severities: The severities evaluated, a subset of 1..5. Defaults to all five.
        num_bins: Bins of the calibration error. Defaults to ``15`` (TorchUncertainty's default).

    Raises:
        ValueError: On an empty or duplicated corruption list, or a severity outside 1..5.
    """

    def __init__(
        self,
        num_classes: int,
        corruptions: Sequence[str],
        severities: Sequence[int] = SEVERITIES,
        num_bins: int = 15,
    ) -> None:
        super().__init__()
        corruptions, severities = list(corruptions), list(severities)
        if not corruptions or len(set(corruptions)) != len(corruptions):
            raise ValueError(
                f"corruptions must be a non-empty list of distinct names, got {corruptions}."
            )
        self.corruptions, self.severities = corruptions, list(check_severities(severities))
        template = MetricCollection(
            {
                "Acc": Accuracy(task="multiclass", num_classes=num_classes),
                "NLL": CategoricalNLL(),
                "ECE": CalibrationError(
                    task="multiclass", num_bins=num_bins, num_classes=num_classes
                ),
            }
        )
        self.per_set = nn.ModuleDict(
            {self._key(s, c): template.clone() for s in severities for c in corruptions}
        )
        self._seen: set[str] = set()

    @staticmethod
    def _key(severity: int, corruption: str) -> str:
        return f"s{severity}:{corruption}"

    def update(self, severity: int, corruption: str, probs: Tensor, targets: Tensor) -> None:
        """Add a batch of predicted distributions ``(B, C)`` and labels ``(B,)`` of one set.

        Raises:
            ValueError: If ``(severity, corruption)`` is not part of this evaluation.
        """
        key = self._key(severity, corruption)
        if key not in self.per_set:
            raise ValueError(
                f"Severity {severity!r} / corruption {corruption!r} is not evaluated here; "
                f"severities {self.severities}, corruptions {self.corruptions}."
            )
        self.per_set[key].update(probs, targets)
        self._seen.add(key)

    def compute(self) -> dict[str, Tensor]:
        """``shift/s{k}/{Acc,NLL,ECE}`` per severity and ``shift/mean/{Acc,NLL,ECE}``.

        Raises:
            RuntimeError: If a (corruption, severity) set received no batch.
        """
        missing = sorted(set(self.per_set) - self._seen)
        if missing:
            raise RuntimeError(f"No predictions were received for the shifted sets {missing}.")
        results: dict[str, Tensor] = {}
        for severity in self.severities:
            values = [self.per_set[self._key(severity, c)].compute() for c in self.corruptions]
            for metric in SHIFT_METRICS:
                per_corruption = torch.stack([v[metric].float() for v in values])
                results[shift_metric_name(severity, metric)] = per_corruption.mean()
        for metric in SHIFT_METRICS:
            per_severity = [results[shift_metric_name(s, metric)] for s in self.severities]
            results[shift_metric_name("mean", metric)] = torch.stack(per_severity).mean()
        return results

    def reset(self) -> None:
        """Forget every prediction (called after each test epoch)."""
        for metrics in self.per_set.values():
            metrics.reset()
        self._seen = set()
