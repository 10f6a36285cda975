r"""FiLM-Ensemble's layer: a BatchNorm over batch-major ``(B·M, C, ...)`` inputs with one free
affine per member (:class:`FiLMBatchNorm`)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from torch_uncertainty_signorm.members.norm import MemberBatchNorm
from torch_uncertainty_signorm.utils.checks import check_positive_number

from .config import InitCenter, check_init_center

__all__ = ["FiLMBatchNorm"]

#: The torch BatchNorm classes a FiLM member folds back into: the first the replaced layer
#: is an instance of (the activation of a subclass such as timm's ``BatchNormAct2d`` is not
#: part of what FiLM computes).
_PLAIN_BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)


class FiLMBatchNorm(MemberBatchNorm):
    """BatchNorm of any rank over batch-major ``(B·M, C, ...)`` inputs, one free affine per member.

    A per-member BatchNorm (:class:`~torch_uncertainty_signorm.members.norm.MemberBatchNorm`): each
    member's rows are normalized with its own batch statistics (in training) or running
    statistics (in evaluation) and its own ``weight[m]``, ``bias[m]``, all members in one
    call of torch's fused BatchNorm kernel, which also updates row ``m`` of the running
    statistics exactly as :class:`torch.nn.BatchNorm2d` would. Synchronised across processes by
    :func:`~torch_uncertainty_signorm.members.distributed.convert_sync_member_norms`, as σBN. A
    member folds back (:meth:`to_plain`) into the torch BatchNorm class :meth:`from_module` replaced
    (``BatchNorm2d`` for a layer built directly).

    Args:
        num_features: Number of channels C.
        num_estimators: Number of members M.
        eps: Added to the variance, as in BatchNorm.
        momentum: Running-statistics momentum; ``None`` for a cumulative average.
        track_running_stats: Whether to keep running statistics (else batch statistics
            are used in evaluation too).
    """

    def __init__(
        self,
        num_features: int,
        num_estimators: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        track_running_stats: bool = True,
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(num_features, num_estimators)
        factory = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.ones(num_estimators, num_features, **factory))
        self.bias = nn.Parameter(torch.zeros(num_estimators, num_features, **factory))
        self.init_statistics(eps, momentum, track_running_stats, device, dtype)

    def affine(self) -> tuple[Tensor, Tensor]:
        """Members' free scales and shifts, both ``(M, C)``."""
        return self.weight, self.bias

    @torch.no_grad()
    def reset_members(
        self,
        gain: float,
        weight_center: Tensor | float = 1.0,
        bias_center: Tensor | float = 0.0,
    ) -> None:
        """Draw every member's affine as ``center + gain · U(±sqrt(6 / (M + C)))``."""
        check_positive_number("gain", gain, allow_zero=True)
        bound = gain * math.sqrt(6.0 / (self.num_estimators + self.num_features))
        for param, center in ((self.weight, weight_center), (self.bias, bias_center)):
            param.uniform_(-bound, bound).add_(torch.as_tensor(center).to(param).reshape(-1))

    @classmethod
    def from_module(
        cls,
        module: nn.Module,
        num_estimators: int,
        *,
        gain: float,
        init_center: InitCenter = "affine",
    ) -> FiLMBatchNorm:
        """The FiLM layer replacing ``module``: its hyper-parameters and running statistics,
        members drawn around ``module``'s affine (``"affine"``) or around zero (``"zero"``)."""
        check_init_center(init_center)
        ref = module.weight if module.weight is not None else module.running_mean
        layer = cls(
            module.num_features,
            num_estimators,
            eps=module.eps,
            momentum=module.momentum,
            track_running_stats=module.track_running_stats,
            device=None if ref is None else ref.device,
            dtype=None if module.weight is None else module.weight.dtype,
        )
        layer.plain_type = next(
            (t for t in _PLAIN_BATCH_NORMS if isinstance(module, t)), nn.BatchNorm2d
        )
        if init_center == "affine" and module.affine:
            layer.reset_members(gain, module.weight.detach(), module.bias.detach())
        elif init_center == "affine":
            layer.reset_members(gain)
        else:
            layer.reset_members(gain, 0.0, 0.0)
        layer.copy_statistics(module)
        return layer
