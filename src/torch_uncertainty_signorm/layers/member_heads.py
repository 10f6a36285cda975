"""Fresh per-member classifier heads: a σNorm layer, then a linear layer, batched over members."""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor, nn

from .member_statistics import check_batch_statistics
from .signorm import SigmaBatchNorm1d, SigmaLayerNorm

__all__ = ["MemberHeads"]


class MemberHeads(nn.Module):
    """M independent heads applied to member-major features ``(M·B, D)`` in one pass.

    Each member's head normalises its features (own statistics, own scale logits) and
    applies its own freshly initialised linear layer; a shared head would be a symmetric
    fixed point where the diversity regulariser has no gradient.

    Args:
        in_features: Feature dimension D.
        num_classes: Number of classes C.
        num_estimators: Number of members M.
        norm: ``"batch"`` (σBN, for convolutional backbones) or ``"layer"`` (σLN, for
            transformers).
    """

    def __init__(
        self,
        in_features: int,
        num_classes: int,
        num_estimators: int,
        norm: Literal["batch", "layer"] = "batch",
    ) -> None:
        super().__init__()
        if norm not in ("batch", "layer"):
            raise ValueError(f"head norm must be 'batch' or 'layer', got {norm!r}.")
        for name, value in (("in_features", in_features), ("num_classes", num_classes)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}.")
        self.num_estimators = num_estimators
        norm_cls = SigmaBatchNorm1d if norm == "batch" else SigmaLayerNorm
        self.norm = norm_cls(in_features, num_estimators)
        self.weight = nn.Parameter(torch.empty(num_estimators, num_classes, in_features))
        self.bias = nn.Parameter(torch.empty(num_estimators, num_classes))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialise each member's linear layer as :class:`torch.nn.Linear` would."""
        bound = 1 / math.sqrt(self.weight.shape[-1])
        for member_weight in self.weight:  # initialisation only, not the forward pass
            nn.init.kaiming_uniform_(member_weight, a=math.sqrt(5))
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, features: Tensor) -> Tensor:
        """Member-major logits ``(M·B, C)`` from member-major features ``(M·B, D)``."""
        if features.dim() != 2 or features.shape[1] != self.weight.shape[-1]:
            raise ValueError(
                f"MemberHeads expects features of shape (M·B, {self.weight.shape[-1]}), "
                f"got {tuple(features.shape)}."
            )
        if self.training and isinstance(self.norm, SigmaBatchNorm1d):
            check_batch_statistics(self.norm, features)  # before σBN's own, less helpful check
        hidden = self.norm(features).unflatten(0, (self.num_estimators, -1))
        weight = self.weight.to(hidden.dtype).transpose(1, 2)
        logits = torch.baddbmm(self.bias.to(hidden.dtype).unsqueeze(1), hidden, weight)
        return logits.flatten(0, 1)
