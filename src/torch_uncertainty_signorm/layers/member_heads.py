"""Fresh per-member classifier heads: a σNorm layer, then a linear layer, batched over members."""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor, nn

from ..checks import check_integer
from .member_statistics import check_batch_statistics
from .signorm import SigmaBatchNorm1d, SigmaLayerNorm

__all__ = ["MemberHeads", "member_linear", "plain_linear"]


class MemberHeads(nn.Module):
    """M independent heads applied to batch-major features ``(B·M, D)`` in one pass.

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
        check_integer("in_features", in_features)
        check_integer("num_classes", num_classes)
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
        if self.training and isinstance(self.norm, SigmaBatchNorm1d):
            check_batch_statistics(self.norm, features)  # before σBN's own, less helpful check
        return member_linear(self.norm(features), self.weight, self.bias)

    def to_plain(self, member: int) -> nn.Sequential:
        """Member ``member``'s head as plain layers: its norm folded back
        (:meth:`~torch_uncertainty_signorm.layers.member_norm.MemberNorm.to_plain`), then its
        linear layer."""
        linear = plain_linear(self.weight, self.bias, member)
        return nn.Sequential(self.norm.to_plain(member), linear)


def plain_linear(weight: Tensor, bias: Tensor, member: int) -> nn.Linear:
    """Member ``member``'s :class:`torch.nn.Linear` of the members' weights ``(M, C, D)`` and
    biases ``(M, C)`` (same device and dtype)."""
    check_integer("member", member, low=0, high=weight.shape[0] - 1)
    out_features, in_features = weight.shape[1:]
    linear = nn.Linear(in_features, out_features, device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        linear.weight.copy_(weight[member])
        linear.bias.copy_(bias[member])
    return linear


def member_linear(features: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """Member m's linear layer on member m's rows: batch-major ``(B·M, D)`` features in,
    member-major ``(M·B, C)`` logits out.

    Args:
        features: Batch-major features ``(B·M, D)``.
        weight: Members' weights ``(M, C, D)``.
        bias: Members' biases ``(M, C)``.
    """
    num_estimators = weight.shape[0]
    if features.shape[0] % num_estimators != 0:
        raise ValueError(
            f"Member heads expect a batch of B·M rows with M = num_estimators = "
            f"{num_estimators}, got {features.shape[0]} rows."
        )
    hidden = features.unflatten(0, (-1, num_estimators)).transpose(0, 1)  # (M, B, D) view
    logits = torch.baddbmm(
        bias.to(hidden.dtype).unsqueeze(1), hidden, weight.to(hidden.dtype).transpose(1, 2)
    )
    return logits.flatten(0, 1)
