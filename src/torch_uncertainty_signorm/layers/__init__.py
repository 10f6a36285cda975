"""σNorm layers and the members' heads."""

from .member_heads import MemberHeads
from .signorm import (
    SigmaBatchNorm,
    SigmaBatchNorm1d,
    SigmaBatchNorm2d,
    SigmaBatchNorm3d,
    SigmaGroupNorm,
    SigmaLayerNorm,
    SigmaLayerNorm2d,
    SigmaNorm,
    SigmaRMSNorm,
    SigmaSyncBatchNorm,
    output_preserving_reparameterization,
)

__all__ = [
    "MemberHeads",
    "SigmaBatchNorm",
    "SigmaBatchNorm1d",
    "SigmaBatchNorm2d",
    "SigmaBatchNorm3d",
    "SigmaGroupNorm",
    "SigmaLayerNorm",
    "SigmaLayerNorm2d",
    "SigmaNorm",
    "SigmaRMSNorm",
    "SigmaSyncBatchNorm",
    "output_preserving_reparameterization",
]
