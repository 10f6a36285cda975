"""The settings of a σNorm-Ensemble as one object (as peft's ``LoraConfig``), read and written by
the wrapper (also under its lowercase name), a recipe's ``config:`` block and an export's
``config.json``.

Example:
    >>> config = SigmaNormConfig(tau=0.5, regularized_layers="resnet18")
    >>> SigmaNormConfig.from_dict(config.to_dict()) == config
    True
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from ..members.config import (
    MethodConfig,
    check_choice,
    check_eval_chunk_size,
    check_wrapper_settings,
)
from ..utils.checks import check_positive_number
from .layer_selection import check_regularized_layers
from .regularization import DEFAULT_DIVERSITY_STRENGTH, DEFAULT_TAU, check_penalty_settings

__all__ = ["SigmaNormConfig"]


@dataclasses.dataclass(frozen=True)
class SigmaNormConfig(MethodConfig):
    """The settings of a σNorm-Ensemble
    (:class:`~torch_uncertainty_signorm.SigmaNormEnsemble`, whose arguments document each).

    Every value is checked when the config is made; ``regularized_layers`` is kept as a string
    or a tuple of names. The settings are the method's only: which weights the backbone starts
    from is not one of them (the lab's ``finetune_ensemble`` loads a single model's checkpoint).

    Raises:
        ValueError: Naming the field and its valid values.
    """

    num_classes: int | None = None
    pretrained: bool = False
    regularized_layers: str | tuple[str, ...] = "all"
    tau: float = DEFAULT_TAU
    diversity_strength: float = DEFAULT_DIVERSITY_STRENGTH
    scale_init_std: float = 1.0
    member_spread: float = 0.0
    head: str | None = None
    head_norm: Literal["auto", "batch", "layer"] = "auto"
    head_scale_init: Literal["auto", "unit", "features"] = "auto"
    expand_at: str = "auto"
    eval_chunk_size: int | Literal["auto"] | None = "auto"

    def __post_init__(self) -> None:
        check_eval_chunk_size(self.eval_chunk_size)
        check_choice("head_norm", self.head_norm, ("auto", "batch", "layer"))
        check_choice("head_scale_init", self.head_scale_init, ("auto", "unit", "features"))
        tau, strength = check_penalty_settings(self.tau, self.diversity_strength)
        check_regularized_layers(self.regularized_layers)
        check_wrapper_settings(self.num_classes, self.head, self.expand_at)
        if not isinstance(self.pretrained, bool):
            raise ValueError(f"pretrained must be True or False, got {self.pretrained!r}.")
        normalized = {
            "tau": tau,
            "diversity_strength": strength,
            "scale_init_std": check_positive_number("scale_init_std", self.scale_init_std, True),
            "member_spread": check_positive_number("member_spread", self.member_spread, True),
            "regularized_layers": self.regularized_layers
            if isinstance(self.regularized_layers, str)
            else tuple(self.regularized_layers),
        }
        for name, value in normalized.items():
            object.__setattr__(self, name, value)
