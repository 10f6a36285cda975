"""Linear layers of M members applied in one pass: batch-major features ``(B·M, D)`` in,
member-major logits ``(M·B, C)`` out (TorchUncertainty's ensemble contract)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..utils.checks import check_integer

__all__ = ["MemberLinear", "member_linear", "plain_linear"]


class MemberLinear(nn.Module):
    """M independent linear heads on batch-major features ``(B·M, D)``, in one pass.

    Each member's head is initialised as :class:`torch.nn.Linear` would be.
    """

    def __init__(self, in_features: int, num_classes: int, num_estimators: int) -> None:
        super().__init__()
        check_integer("in_features", in_features)
        check_integer("num_classes", num_classes)
        check_integer("num_estimators", num_estimators)
        self.num_estimators = num_estimators
        self.weight = nn.Parameter(torch.empty(num_estimators, num_classes, in_features))
        self.bias = nn.Parameter(torch.empty(num_estimators, num_classes))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.shape[-1])
        for member_weight in self.weight:  # initialisation only, not the forward pass
            nn.init.kaiming_uniform_(member_weight, a=math.sqrt(5))
        self.bias.uniform_(-bound, bound)

    def forward(self, features: Tensor) -> Tensor:
        """Member-major logits ``(M·B, C)`` from batch-major features ``(B·M, D)``."""
        if features.dim() != 2 or features.shape[1] != self.weight.shape[-1]:
            raise ValueError(
                f"MemberLinear expects features of shape (B·M, {self.weight.shape[-1]}), got "
                f"{tuple(features.shape)}."
            )
        return member_linear(features, self.weight, self.bias)

    def to_plain(self, member: int) -> nn.Linear:
        """Member ``member``'s head as one :class:`torch.nn.Linear`."""
        return plain_linear(self.weight, self.bias, member)


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
