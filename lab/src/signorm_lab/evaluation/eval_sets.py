"""What each test dataloader holds, so one evaluation can score many OOD and shifted sets.

TorchUncertainty's routine reads the test loaders by position (0: in-distribution, 1: OOD,
2: shifted). A near/far OOD benchmark and a severity sweep need many more loaders, each with a
label: an :class:`EvalSet` per loader, in ``test_dataloader()`` order, published by the
datamodule as ``eval_sets`` and read by
:class:`~signorm_lab.callbacks.OODShiftEvaluation`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "OOD_GROUPS",
    "OOD_METRICS",
    "SEVERITIES",
    "SHIFT_METRICS",
    "SHIFT_PREFIX",
    "EvalSet",
    "check_eval_flags",
    "check_severities",
    "ood_metric_name",
    "shift_metric_name",
]

#: OOD groups, in the order OpenOOD v1.5 reports them.
OOD_GROUPS = ("near", "far")
#: The OOD detection metrics logged per set and per group.
OOD_METRICS = ("AUROC", "AUPR", "FPR95")
#: Corruption severities of the ``-C`` benchmarks.
SEVERITIES = (1, 2, 3, 4, 5)
#: The metrics logged per severity.
SHIFT_METRICS = ("Acc", "NLL", "ECE")
SHIFT_PREFIX = "shift"


def check_severities(severities: Iterable[int], name: str = "severities") -> tuple[int, ...]:
    """``severities`` as a tuple if they are distinct values of :data:`SEVERITIES` (no bool).

    Raises:
        ValueError: Naming the values and the valid ones.
    """
    severities = tuple(severities)
    bad = [s for s in severities if isinstance(s, bool) or s not in SEVERITIES]
    if not severities or bad or len(set(severities)) != len(severities):
        raise ValueError(
            f"{name} must be distinct integers in {SEVERITIES[0]}..{SEVERITIES[-1]}, got "
            f"{list(severities)}."
        )
    return severities


def check_eval_flags(
    eval_near_far_ood: bool, eval_shift_severities: bool, **single_set_flags: bool
) -> None:
    """Refuse ``eval_ood``/``eval_shift`` beside the loaders of ``eval_sets``: both take positions.

    ``single_set_flags`` are the datamodule's ``eval_ood`` (and ``eval_shift``): TorchUncertainty's
    routine reads their loaders at fixed positions, which the loaders of :class:`EvalSet` would
    then also take.

    Raises:
        ValueError: Naming the flags of both kinds.
    """
    if any(single_set_flags.values()) and (eval_near_far_ood or eval_shift_severities):
        given = " / ".join(f"{name}={value!r}" for name, value in single_set_flags.items())
        raise ValueError(
            f"{given} (TorchUncertainty's single-set loaders, read by position by the routine) "
            f"cannot be combined with eval_near_far_ood={eval_near_far_ood!r} / "
            f"eval_shift_severities={eval_shift_severities!r} (the loaders of eval_sets, read by "
            f"OODShiftEvaluation): use one or the other."
        )


def ood_metric_name(group: str, metric: str, set_name: str | None = None) -> str:
    """``ood_near/AUROC`` (group mean) or ``ood_near/CIFAR100/AUROC`` (one set)."""
    return f"ood_{group}/{metric}" if set_name is None else f"ood_{group}/{set_name}/{metric}"


def shift_metric_name(severity: int | str, metric: str) -> str:
    """``shift/s3/ECE`` for a severity, ``shift/mean/ECE`` for ``severity="mean"``."""
    level = severity if severity == "mean" else f"s{severity}"
    return f"{SHIFT_PREFIX}/{level}/{metric}"


@dataclass(frozen=True)
class EvalSet:
    """The role of one test dataloader.

    Args:
        kind: ``"id"`` (the clean test set), ``"ood"`` or ``"shift"``.
        name: Display name, used in metric names (``SVHN``, ``gaussian_noise``...).
        group: For ``kind="ood"``, ``"near"`` or ``"far"``.
        severity: For ``kind="shift"``, the corruption severity in 1..5.

    Raises:
        ValueError: If the fields do not describe one of the three kinds.
    """

    kind: Literal["id", "ood", "shift"]
    name: str
    group: str | None = None
    severity: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("id", "ood", "shift"):
            raise ValueError(f"EvalSet kind must be 'id', 'ood' or 'shift', got {self.kind!r}.")
        if self.kind == "ood" and self.group not in OOD_GROUPS:
            raise ValueError(
                f"OOD set {self.name!r} needs group 'near' or 'far', got {self.group!r}."
            )
        if self.kind == "shift" and self.severity not in SEVERITIES:
            raise ValueError(
                f"Shifted set {self.name!r} needs a severity in {SEVERITIES}, got "
                f"{self.severity!r}."
            )
