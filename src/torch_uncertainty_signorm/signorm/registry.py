"""The one registry of normalization types: which σNorm layer replaces which plain layer.

Conversion (:mod:`~torch_uncertainty_signorm.signorm.conversion`) reads :data:`NORM_REGISTRY`; the
way back is each σNorm layer's own ``to_plain(member)``
(:class:`~torch_uncertainty_signorm.members.norm.MemberNorm`), whose plain class the
registry maps back to the same σNorm class. Types match *exactly*: a
subclass may change what the layer computes (timm's ``BatchNormAct2d``, ``GroupNormAct`` and
``LayerNormAct`` apply an activation after the norm, which a σNorm layer would silently drop;
timm's ``*Fp32`` norms compute in float32, which their own σNorm classes do too), so an
unregistered subclass of a supported norm is refused by :func:`check_norm_type` with an error
naming it.
"""

from __future__ import annotations

from torch import nn

from ..utils import _compat
from . import layers as signorm
from .layers import SigmaNorm

__all__ = ["NORM_REGISTRY", "check_norm_type", "signorm_class_for"]


def _timm_norms() -> dict[type, type[SigmaNorm]]:
    """timm's norms and the σNorm classes replacing them; none without timm (the ``timm`` extra),
    where no backbone holds them. Its ``LayerNorm``, ``RmsNorm``, ``GroupNorm`` and
    ``GroupNorm1`` compute what torch's classes compute (their members fold back into torch's);
    its ``*Fp32`` norms have float32 σNorm counterparts."""
    try:
        from timm.layers import norm as timm_norm
    except ImportError:
        return {}
    return {
        timm_norm.LayerNorm: signorm.SigmaLayerNorm,
        timm_norm.LayerNormFp32: signorm.SigmaLayerNormFp32,
        timm_norm.LayerNorm2d: signorm.SigmaLayerNorm2d,
        timm_norm.LayerNorm2dFp32: signorm.SigmaLayerNorm2dFp32,
        timm_norm.RmsNorm: signorm.SigmaRMSNorm,
        timm_norm.RmsNormFp32: signorm.SigmaRMSNormFp32,
        timm_norm.GroupNorm: signorm.SigmaGroupNorm,
        timm_norm.GroupNorm1: signorm.SigmaGroupNorm,
    }


#: Exact plain type → the σNorm class replacing it: torch's norms, and timm's where timm is
#: installed (:func:`_timm_norms`).
NORM_REGISTRY: dict[type, type[SigmaNorm]] = {
    nn.BatchNorm1d: signorm.SigmaBatchNorm1d,
    nn.BatchNorm2d: signorm.SigmaBatchNorm2d,
    nn.BatchNorm3d: signorm.SigmaBatchNorm3d,
    nn.SyncBatchNorm: signorm.SigmaSyncBatchNorm,
    nn.LayerNorm: signorm.SigmaLayerNorm,
    nn.GroupNorm: signorm.SigmaGroupNorm,
    nn.RMSNorm: signorm.SigmaRMSNorm,
    **_timm_norms(),
}
#: Bases whose unregistered subclasses are refused rather than skipped.
_NORM_BASES = (*_compat.BATCH_NORMS, nn.LayerNorm, nn.GroupNorm, nn.RMSNorm)


def signorm_class_for(module: nn.Module) -> type[SigmaNorm] | None:
    """The σNorm class replacing ``module`` (exact type match), or ``None``."""
    return NORM_REGISTRY.get(type(module))


def check_norm_type(name: str, module: nn.Module) -> None:
    """Refuse a subclass of a supported norm that the registry does not list.

    Raises:
        TypeError: Naming the layer and its type (e.g. timm's ``BatchNormAct2d``, whose
            activation a σNorm layer would drop).
    """
    if signorm_class_for(module) is None and isinstance(module, _NORM_BASES):
        kind = type(module)
        raise TypeError(
            f"Layer {name!r} is a {kind.__module__}.{kind.__qualname__}, a subclass of a "
            f"normalization layer that σNorm does not convert: it may compute more than the "
            f"norm (timm's BatchNormAct2d/GroupNormAct/LayerNormAct apply an activation, "
            f"which σNorm would drop). Build the backbone with plain norm layers (timm: "
            f"norm_layer=nn.BatchNorm2d and a separate activation)."
        )
