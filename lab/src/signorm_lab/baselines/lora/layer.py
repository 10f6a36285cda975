r"""LoRA-Ensemble's layer: a frozen linear projection plus one low-rank adapter per member, all
members in one batched pass (:class:`MemberLoRALinear`)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from torch_uncertainty_signorm.utils.checks import check_integer, check_positive_number

__all__ = ["MemberLoRALinear"]


class MemberLoRALinear(nn.Module):
    """A frozen :class:`torch.nn.Linear` plus one rank-``r`` adapter per member and slice.

    Args:
        base: The projection to adapt (kept as is, frozen by the caller).
        num_estimators: Number of members M.
        rank: Adapter rank r.
        alpha: Adapter scaling numerator: the update is ``alpha / rank · B A``.
        num_slices: Number S of equal output slices adapted separately (3 for a fused
            query-key-value projection, else 1).
        init_gain: Xavier-uniform gain of the down-projections ``A``.
    """

    def __init__(
        self,
        base: nn.Linear,
        num_estimators: int,
        rank: int = 8,
        alpha: float = 8.0,
        num_slices: int = 1,
        init_gain: float = 10.0,
    ) -> None:
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"MemberLoRALinear adapts an nn.Linear, got {type(base).__name__}.")
        check_integer("num_estimators", num_estimators)
        check_integer("rank", rank)
        check_integer("num_slices", num_slices)
        check_positive_number("alpha", alpha)
        check_positive_number("init_gain", init_gain, allow_zero=True)
        if base.out_features % num_slices != 0:
            raise ValueError(
                f"num_slices={num_slices} does not divide the {base.out_features} output "
                f"features of the adapted projection."
            )
        self.base = base
        self.num_estimators = num_estimators
        self.rank = rank
        self.scaling = alpha / rank
        self.num_slices = num_slices
        self.init_gain = init_gain
        factory = {"device": base.weight.device, "dtype": base.weight.dtype}
        slice_out = base.out_features // num_slices
        self.lora_A = nn.Parameter(
            torch.empty(num_estimators, num_slices, rank, base.in_features, **factory)
        )
        self.lora_B = nn.Parameter(
            torch.zeros(num_estimators, num_slices, slice_out, rank, **factory)
        )
        self.reset_adapters()

    @torch.no_grad()
    def reset_adapters(self) -> None:
        """``A`` Xavier-uniform with gain ``init_gain`` (per ``r × d_in`` matrix), ``B = 0``."""
        fan_in, fan_out = self.lora_A.shape[-1], self.lora_A.shape[-2]
        bound = self.init_gain * math.sqrt(6.0 / (fan_in + fan_out))
        self.lora_A.uniform_(-bound, bound)
        self.lora_B.zero_()

    def delta_weight(self, member: int) -> Tensor:
        r"""Member ``member``'s update :math:`\frac{\alpha}{r} B_m A_m`, ``(d_out, d_in)``.

        Adding it to the projection's weight merges the member into a plain backbone.
        """
        return self.scaling * torch.cat(
            [b @ a for a, b in zip(self.lora_A[member], self.lora_B[member], strict=True)]
        )

    def to_plain(self, member: int) -> nn.Linear:
        """Member ``member``'s projection as one :class:`torch.nn.Linear`: the adapter merged,
        ``W + (α/r) B_m A_m``, the bias kept."""
        check_integer("member", member, low=0, high=self.num_estimators - 1)
        base = self.base
        linear = nn.Linear(
            base.in_features,
            base.out_features,
            bias=base.bias is not None,
            device=base.weight.device,
            dtype=base.weight.dtype,
        )
        with torch.no_grad():
            linear.weight.copy_(base.weight + self.delta_weight(member))
            if base.bias is not None:
                linear.bias.copy_(base.bias)
        return linear

    def forward(self, x: Tensor) -> Tensor:
        """``W x + b`` for every row plus member m's update on member m's rows."""
        if x.shape[0] % self.num_estimators != 0:
            raise ValueError(
                f"MemberLoRALinear expects a batch of B·M rows (batch-major) with M = "
                f"num_estimators = {self.num_estimators}, got {x.shape[0]} rows."
            )
        members = x.unflatten(0, (-1, self.num_estimators))  # (B, M, ..., d_in)
        hidden = torch.einsum("bm...i,msri->bm...sr", members, self.lora_A.to(x.dtype))
        update = torch.einsum("bm...sr,msor->bm...so", hidden, self.lora_B.to(x.dtype))
        return self.base(x) + self.scaling * update.flatten(-2).flatten(0, 1)

    def extra_repr(self) -> str:
        return (
            f"num_estimators={self.num_estimators}, rank={self.rank}, scaling={self.scaling}, "
            f"num_slices={self.num_slices}"
        )
