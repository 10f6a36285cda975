"""σNorm layers, their per-member bases and the members' heads."""

from . import signorm
from .member_heads import MemberHeads
from .member_norm import MemberBatchNorm, MemberNorm
from .signorm import *  # noqa: F403  (every σNorm layer, listed in signorm.__all__)

__all__ = ["MemberBatchNorm", "MemberHeads", "MemberNorm", *signorm.__all__]
