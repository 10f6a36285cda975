"""σNorm layers and the members' heads."""

from .member_heads import MemberHeads
from .signorm import (
    SigmaBatchNorm1d,
    SigmaBatchNorm2d,
    SigmaBatchNorm3d,
    SigmaGroupNorm,
    SigmaLayerNorm,
    SigmaLayerNorm2d,
    SigmaRMSNorm,
    SigmaSyncBatchNorm,
    output_preserving_reparameterization,
)

__all__ = [
    "MemberHeads",
    "SigmaBatchNorm1d",
    "SigmaBatchNorm2d",
    "SigmaBatchNorm3d",
    "SigmaGroupNorm",
    "SigmaLayerNorm",
    "SigmaLayerNorm2d",
    "SigmaRMSNorm",
    "SigmaSyncBatchNorm",
    "output_preserving_reparameterization",
]
