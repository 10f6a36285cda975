"""The settings of a LoRA-Ensemble as one object (:class:`LoRAEnsembleConfig`)."""

from __future__ import annotations

import dataclasses

from torch_uncertainty_signorm.members.config import MethodConfig, check_wrapper_settings
from torch_uncertainty_signorm.members.selection import check_selection
from torch_uncertainty_signorm.utils.checks import check_integer, check_positive_number

__all__ = ["LoRAEnsembleConfig"]


@dataclasses.dataclass(frozen=True)
class LoRAEnsembleConfig(MethodConfig):
    """The settings of a LoRA-Ensemble
    (:class:`~signorm_lab.baselines.LoRAEnsemble`, whose arguments document each);
    ``target_modules`` is kept as a string, a tuple of names or ``None``.

    Raises:
        ValueError: Naming the field and its valid values.
    """

    num_classes: int | None = None
    rank: int = 8
    alpha: float = 8.0
    target_modules: str | tuple[str, ...] | None = None
    init_gain: float = 10.0
    head: str | None = None
    expand_at: str = "auto"

    def __post_init__(self) -> None:
        rank = check_integer("rank", self.rank)
        alpha = check_positive_number("alpha", self.alpha)
        init_gain = check_positive_number("init_gain", self.init_gain, allow_zero=True)
        check_wrapper_settings(self.num_classes, self.head, self.expand_at)
        targets = self.target_modules
        if targets is not None:
            check_selection("target_modules", targets)
            targets = targets if isinstance(targets, str) else tuple(targets)
        for name, value in (
            ("rank", rank),
            ("alpha", alpha),
            ("init_gain", init_gain),
            ("target_modules", targets),
        ):
            object.__setattr__(self, name, value)
