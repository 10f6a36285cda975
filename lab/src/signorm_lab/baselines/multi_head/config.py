"""The settings of a multi-head ensemble as one object (:class:`MultiHeadConfig`)."""

from __future__ import annotations

import dataclasses

from torch_uncertainty_signorm.members.config import MethodConfig, check_wrapper_settings

__all__ = ["MultiHeadConfig"]


@dataclasses.dataclass(frozen=True)
class MultiHeadConfig(MethodConfig):
    """The settings of a multi-head ensemble
    (:class:`~signorm_lab.baselines.MultiHeadEnsemble`, whose arguments document
    each). The members split off after the backbone, so there is no ``expand_at``.

    Raises:
        ValueError: Naming the field and its valid values.
    """

    num_classes: int | None = None
    head: str | None = None

    def __post_init__(self) -> None:
        check_wrapper_settings(self.num_classes, self.head, "input")
