"""The settings of a FiLM-Ensemble as one object (:class:`FiLMConfig`)."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from torch_uncertainty_signorm.members.config import (
    MethodConfig,
    check_choice,
    check_wrapper_settings,
)
from torch_uncertainty_signorm.utils.checks import check_positive_number

__all__ = ["FiLMConfig", "InitCenter", "check_init_center"]

#: Centre of FiLM-Ensemble's member initialisation.
InitCenter = Literal["affine", "zero"]


def check_init_center(init_center: Any) -> None:
    """Refuse an ``init_center`` other than ``"affine"`` or ``"zero"``."""
    check_choice("init_center", init_center, ("affine", "zero"))


@dataclasses.dataclass(frozen=True)
class FiLMConfig(MethodConfig):
    """The settings of a FiLM-Ensemble
    (:class:`~signorm_lab.baselines.FiLMEnsemble`, whose arguments document each).

    Raises:
        ValueError: Naming the field and its valid values.
    """

    num_classes: int | None = None
    gain: float = 1.0
    init_center: InitCenter = "affine"
    head: str | None = None
    expand_at: str = "auto"

    def __post_init__(self) -> None:
        check_wrapper_settings(self.num_classes, self.head, self.expand_at)
        gain = check_positive_number("gain", self.gain, allow_zero=True)
        check_init_center(self.init_center)
        object.__setattr__(self, "gain", gain)
