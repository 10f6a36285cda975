"""σNorm layers, their per-member bases and the members' heads."""

from .member_heads import MemberHeads
from .member_norm import MemberBatchNorm, MemberNorm
from .signorm import (
    SigmaBatchNorm,
    SigmaBatchNorm1d,
    SigmaBatchNorm2d,
    SigmaBatchNorm3d,
    SigmaGroupNorm,
    SigmaLayerNorm,
    SigmaLayerNorm2d,
    SigmaLayerNorm2dFp32,
    SigmaLayerNormFp32,
    SigmaNorm,
    SigmaRMSNorm,
    SigmaRMSNormFp32,
    SigmaSyncBatchNorm,
    output_preserving_reparameterization,
)

__all__ = [
    "MemberBatchNorm",
    "MemberHeads",
    "MemberNorm",
    "SigmaBatchNorm",
    "SigmaBatchNorm1d",
    "SigmaBatchNorm2d",
    "SigmaBatchNorm3d",
    "SigmaGroupNorm",
    "SigmaLayerNorm",
    "SigmaLayerNorm2d",
    "SigmaLayerNorm2dFp32",
    "SigmaLayerNormFp32",
    "SigmaNorm",
    "SigmaRMSNorm",
    "SigmaRMSNormFp32",
    "SigmaSyncBatchNorm",
    "output_preserving_reparameterization",
]
