"""Fresh per-member classifier heads: a normalization layer, then a linear layer, batched over
members (the paper's heads)."""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor, nn

from ..utils.checks import check_integer
from .head_norm import HeadBatchNorm, HeadLayerNorm
from .linear import member_linear, plain_linear
from .statistics import check_batch_statistics

__all__ = ["MemberHeads", "upgrade_legacy_heads"]


class MemberHeads(nn.Module):
    """M independent heads applied to batch-major features ``(B·M, D)`` in one pass.

    Each member's head normalizes its features with an ordinary BatchNorm or LayerNorm of its
    own (own statistics, own affine at the base learning rate:
    :mod:`~torch_uncertainty_signorm.members.head_norm`) and applies its own freshly initialised
    linear layer; a shared head would be a symmetric fixed point where the diversity regularizer
    has no gradient.

    A state dict of the earlier heads, whose norm was a from-scratch σNorm (``norm.scale_logits``,
    no shift), loads as the same function: ``weight = σ(scale_logits)``, ``bias = 0``.

    Args:
        in_features: Feature dimension D.
        num_classes: Number of classes C.
        num_estimators: Number of members M.
        norm: ``"batch"`` (BatchNorm, for convolutional backbones) or ``"layer"`` (LayerNorm,
            for transformers).
        scale_init: ``"unit"`` (the paper's) or ``"features"``: the norm's scale starts at its
            input's, measured on the first training batch (a converted pretrained backbone).
    """

    def __init__(
        self,
        in_features: int,
        num_classes: int,
        num_estimators: int,
        norm: Literal["batch", "layer"] = "batch",
        scale_init: Literal["unit", "features"] = "unit",
    ) -> None:
        super().__init__()
        if norm not in ("batch", "layer"):
            raise ValueError(f"head norm must be 'batch' or 'layer', got {norm!r}.")
        check_integer("in_features", in_features)
        check_integer("num_classes", num_classes)
        self.num_estimators = num_estimators
        norm_cls = HeadBatchNorm if norm == "batch" else HeadLayerNorm
        self.norm = norm_cls(in_features, num_estimators, scale_init=scale_init)
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
        """Member-major logits ``(M·B, C)`` from batch-major features ``(B·M, D)``.

        The batched product reads member m's rows with stride M and writes its logits as
        one contiguous block: the reorder to TorchUncertainty's member-major layout comes
        free with it.
        """
        if features.dim() != 2 or features.shape[1] != self.weight.shape[-1]:
            raise ValueError(
                f"MemberHeads expects features of shape (B·M, {self.weight.shape[-1]}), "
                f"got {tuple(features.shape)}."
            )
        if self.training and isinstance(self.norm, HeadBatchNorm):
            check_batch_statistics(self.norm, features)  # before σBN's own, less helpful check
        return member_linear(self.norm(features), self.weight, self.bias)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        upgrade_legacy_heads(state_dict, prefix)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def to_plain(self, member: int) -> nn.Sequential:
        """Member ``member``'s head as plain layers: its norm folded back
        (:meth:`~torch_uncertainty_signorm.members.norm.MemberNorm.to_plain`), then its
        linear layer."""
        linear = plain_linear(self.weight, self.bias, member)
        return nn.Sequential(self.norm.to_plain(member), linear)


def upgrade_legacy_heads(state: dict, prefix: str = "heads.") -> dict:
    """Rewrite, in place, the earlier σNorm head norm of ``state`` (``{prefix}norm.scale_logits``)
    as the same affine head norm: ``weight = σ(scale_logits)``, ``bias = 0``, scale already
    initialised. Running statistics keep their names. Returns ``state``."""
    logits = state.pop(f"{prefix}norm.scale_logits", None)
    if logits is None or f"{prefix}norm.weight" in state:
        return state
    state[f"{prefix}norm.weight"] = torch.sigmoid(logits)
    state[f"{prefix}norm.bias"] = torch.zeros_like(logits)
    state[f"{prefix}norm.scale_initialised"] = torch.tensor(True)
    return state
