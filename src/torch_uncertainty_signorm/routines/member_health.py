"""Member health: does each member (and the ensemble) still make a usable prediction?

A member can fail while the ensemble's metrics look fine: its σNorm scales collapse and its
output stops depending on the input, it predicts one class, or it outputs NaN. These checks run
on an evaluation set's outputs, from running sums (:class:`OutputStatistics`, accumulated by the
:class:`MemberHealth` metric), so no output is stored. Each found condition is a
:class:`HealthCondition`; :func:`health_message` says it in one line, with what to try.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor
from torchmetrics import Metric

from ..callbacks.identical_members import (  # re-exported: they were defined here
    IDENTICAL_MEMBERS_COSINE,
    identical_members_message,
)
from ..utils.checks import check_integer

__all__ = [
    "CHANCE_MARGIN",
    "CONDITIONS",
    "CONSTANT_OUTPUT_STD",
    "IDENTICAL_MEMBERS_COSINE",
    "ONE_CLASS_SHARE",
    "WARNING_PREFIX",
    "HealthCondition",
    "MemberHealth",
    "OutputStatistics",
    "diagnose",
    "health_conditions",
    "health_counts",
    "health_message",
    "identical_members_message",
    "member_accuracy_nll",
]

#: Share of inputs predicted as one class at and above which a predictor "predicts one class"
#: (flagged only when the labels' most frequent class is below this share).
ONE_CLASS_SHARE = 0.95
#: Mean over classes of the probabilities' std over inputs below which an output is constant.
CONSTANT_OUTPUT_STD = 1e-3
#: Accuracy at or below max(1/C, majority label share) + this margin is chance accuracy.
CHANCE_MARGIN = 0.01
#: The checks, in the order they are reported.
CONDITIONS = ("non_finite", "constant_output", "one_class", "chance_accuracy")
#: How every health warning starts.
WARNING_PREFIX = "σN-Ens member health"

_REMEDIES = {
    "non_finite": "try a lower learning rate, check the inputs for NaN/inf, or train in 32-bit "
    "or bf16-mixed rather than 16-mixed",
    "constant_output": "its σNorm scales may have collapsed: try a lower scale_lr_multiplier "
    "or a higher tau",
    "one_class": "try a lower learning rate or scale_lr_multiplier (after a pretrained "
    "conversion, a fine-tuning rate), and check the head (num_classes, label order)",
    "chance_accuracy": "try a lower learning rate or scale_lr_multiplier (after a pretrained "
    "conversion, a fine-tuning rate), check the head and the labels, or train longer",
}


@dataclass(frozen=True)
class HealthCondition:
    """One failed check: ``condition`` (one of :data:`CONDITIONS`), ``member`` (``None`` for the
    ensemble), the measured ``value`` and the ``threshold`` it crossed."""

    condition: str
    member: int | None
    value: float
    threshold: float


class OutputStatistics(NamedTuple):
    """Running sums over an evaluation set; rows ``0..M-1`` are the members, row ``M`` the
    ensemble (mean probabilities). Sums add across batches and processes."""

    count: Tensor  # () inputs
    label_counts: Tensor  # (C,)
    predicted_counts: Tensor  # (M+1, C) inputs whose argmax is each class
    correct: Tensor  # (M+1,)
    nll_sum: Tensor  # (M+1,)
    prob_sum: Tensor  # (M+1, C)
    prob_sq_sum: Tensor  # (M+1, C)
    non_finite: Tensor  # (M+1,) NaN/inf values in the probabilities (and logits)

    @classmethod
    def of(cls, probs: Tensor, targets: Tensor, logits: Tensor | None = None) -> OutputStatistics:
        """Sums of member probabilities ``(M, N, C)`` against targets ``(N,)``, in float64;
        ``logits`` ``(M, ...)``, when given, are checked for NaN/inf too."""
        if probs.dim() != 3 or targets.shape != probs.shape[1:2]:
            raise ValueError(
                f"Expected member probabilities (M, N, C) and targets (N,), got "
                f"shapes {tuple(probs.shape)} and {tuple(targets.shape)}."
            )
        probs = probs.detach().double()
        sources = torch.cat([probs, probs.mean(dim=0, keepdim=True)])  # (M+1, N, C)
        classes, targets = probs.shape[-1], targets.detach().long()
        predicted = sources.argmax(dim=-1)
        picked = sources.gather(-1, targets.view(1, -1, 1).expand(len(sources), -1, 1))
        non_finite = (~torch.isfinite(sources)).flatten(1).sum(1)
        if logits is not None:
            non_finite[:-1] += (~torch.isfinite(logits.detach())).flatten(1).sum(1)
        return cls(
            count=probs.new_tensor(float(targets.numel())),
            label_counts=F.one_hot(targets, classes).sum(0).double(),
            predicted_counts=F.one_hot(predicted, classes).sum(1).double(),
            correct=(predicted == targets).sum(1).double(),
            nll_sum=-picked.clamp_min(torch.finfo(picked.dtype).tiny).log().sum((1, 2)),
            prob_sum=sources.sum(1),
            prob_sq_sum=sources.square().sum(1),
            non_finite=non_finite.double(),
        )

    def accuracy(self) -> Tensor:
        """Accuracy (a fraction) of each member, then of the ensemble: ``(M+1,)``."""
        return self.correct / self.count

    def nll(self) -> Tensor:
        """Mean negative log-likelihood (nats) of each member, then of the ensemble: ``(M+1,)``."""
        return self.nll_sum / self.count

    def output_std(self) -> Tensor:
        """Mean over classes of the probabilities' std over inputs: ``(M+1,)``."""
        mean = self.prob_sum / self.count
        variance = (self.prob_sq_sum / self.count - mean.square()).clamp_min(0)
        return variance.sqrt().mean(-1)


def diagnose(stats: OutputStatistics) -> list[HealthCondition]:
    """The conditions found in ``stats``: every member first, then the ensemble (none without
    inputs)."""
    count = float(stats.count)
    if count == 0:
        return []
    majority = float(stats.label_counts.max()) / count
    chance = max(1 / stats.label_counts.numel(), majority) + CHANCE_MARGIN
    std, accuracy = stats.output_std(), stats.accuracy()
    top_share = stats.predicted_counts.amax(-1) / count
    checks = {  # condition: (measured per source, threshold, failed per source)
        "non_finite": (stats.non_finite, 0.0, stats.non_finite > 0),
        "constant_output": (std, CONSTANT_OUTPUT_STD, std < CONSTANT_OUTPUT_STD),
        "one_class": (
            top_share,
            ONE_CLASS_SHARE,
            (top_share >= ONE_CLASS_SHARE) & (majority < ONE_CLASS_SHARE),
        ),
        "chance_accuracy": (accuracy, chance, accuracy <= chance),
    }
    members = len(accuracy) - 1
    return [
        HealthCondition(
            name, None if source == members else source, float(value[source]), threshold
        )
        for source in range(members + 1)
        for name, (value, threshold, failed) in checks.items()
        if failed[source]
    ]


def health_conditions(
    probs: Tensor, targets: Tensor, logits: Tensor | None = None
) -> list[HealthCondition]:
    """The conditions of member probabilities ``(M, N, C)`` on targets ``(N,)`` (and, when given,
    the members' logits ``(M, ...)``), as :func:`diagnose`."""
    return diagnose(OutputStatistics.of(probs, targets, logits))


def member_accuracy_nll(probs: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
    """Each member's accuracy (a fraction) and NLL (nats), both ``(M,)``, from member
    probabilities ``(M, N, C)`` and targets ``(N,)``."""
    stats = OutputStatistics.of(probs, targets)
    return stats.accuracy()[:-1], stats.nll()[:-1]


def health_counts(conditions: list[HealthCondition]) -> dict[str, int]:
    """The logged summary: each condition of the ensemble as 0/1 (``one_class``,
    ``constant_output``, ``chance_accuracy``, ``non_finite``), and ``dead_members``, the number
    of members with a constant output or chance accuracy."""
    ensemble = {c.condition for c in conditions if c.member is None}
    dead = {
        c.member
        for c in conditions
        if c.member is not None and c.condition in ("constant_output", "chance_accuracy")
    }
    return {**{name: int(name in ensemble) for name in CONDITIONS}, "dead_members": len(dead)}


def health_message(condition: HealthCondition, step: int, stage: str) -> str:
    """One line: who, at which step, the measured value against its threshold, what to try."""
    who = "the ensemble" if condition.member is None else f"member {condition.member}"
    value, threshold = condition.value, condition.threshold
    what = {
        "non_finite": f"outputs {value:.0f} non-finite value(s) (NaN or inf)",
        "constant_output": f"gives the same output for every input (mean std of its "
        f"probabilities over inputs {value:.2g} < {threshold:g})",
        "one_class": f"predicts one class for {value:.1%} of the inputs (>= {threshold:.0%}) "
        f"while the labels are not one class",
        "chance_accuracy": f"is at chance accuracy ({value:.1%} <= {threshold:.1%}, the "
        f"majority-class or 1/C share + {CHANCE_MARGIN:.0%})",
    }[condition.condition]
    remedy = _REMEDIES[condition.condition]
    return f"{WARNING_PREFIX} ({stage}, step {step}): {who} {what}; {remedy}."


class MemberHealth(Metric):
    """Accumulates :class:`OutputStatistics` of ``num_estimators`` members over an evaluation
    set (summed across processes); :meth:`compute` returns them.

    Args:
        num_estimators: Number of members M (fixed).
        num_classes: Number of classes C of the probabilities (2 for a binary classifier).
    """

    full_state_update = False

    def __init__(self, num_estimators: int, num_classes: int, **kwargs) -> None:
        super().__init__(**kwargs)
        check_integer("num_estimators", num_estimators)
        check_integer("num_classes", num_classes)
        self.num_estimators, sources = num_estimators, num_estimators + 1
        shapes = {
            "count": (),
            "label_counts": (num_classes,),
            "predicted_counts": (sources, num_classes),
            "correct": (sources,),
            "nll_sum": (sources,),
            "prob_sum": (sources, num_classes),
            "prob_sq_sum": (sources, num_classes),
            "non_finite": (sources,),
        }
        for name in OutputStatistics._fields:
            self.add_state(
                name, torch.zeros(shapes[name], dtype=torch.float64), dist_reduce_fx="sum"
            )

    def update(self, probs: Tensor, targets: Tensor, logits: Tensor | None = None) -> None:
        """Add a batch: member probabilities ``(M, B, C)``, targets ``(B,)``, optionally the
        members' logits ``(M, ...)``."""
        if probs.shape[0] != self.num_estimators:
            raise ValueError(
                f"MemberHealth expects {self.num_estimators} members' "
                f"probabilities, got shape {tuple(probs.shape)}."
            )
        batch = OutputStatistics.of(probs, targets, logits)
        for name in OutputStatistics._fields:
            setattr(self, name, getattr(self, name) + getattr(batch, name))

    def compute(self) -> OutputStatistics:
        return OutputStatistics(*(getattr(self, name) for name in OutputStatistics._fields))
