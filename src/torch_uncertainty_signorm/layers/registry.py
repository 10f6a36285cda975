"""The one registry of normalisation types: which σNorm layer replaces which plain layer,
and which plain layer a σNorm member folds back into.

Conversion (:mod:`~torch_uncertainty_signorm.conversion`) and the export of plain member
models (:func:`fold_signorm`) both read :data:`NORM_REGISTRY`, so the two directions cannot
disagree. Types match *exactly*: a subclass may change what the layer computes (timm's
``BatchNormAct2d``, ``GroupNormAct`` and ``LayerNormAct`` apply an activation after the
norm, which a σNorm layer would silently drop), so an unregistered subclass of a supported
norm is refused by :func:`check_norm_type` with an error naming it.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .signorm import (
    SigmaBatchNorm1d,
    SigmaBatchNorm2d,
    SigmaBatchNorm3d,
    SigmaGroupNorm,
    SigmaLayerNorm,
    SigmaLayerNorm2d,
    SigmaRMSNorm,
    SigmaSyncBatchNorm,
    SigmaBatchNorm,
    SigmaNorm,
)

__all__ = [
    "NORM_REGISTRY",
    "check_norm_type",
    "fold_signorm",
    "plain_class_for",
    "signorm_class_for",
]


def _timm_norms() -> dict[type, type[SigmaNorm]]:
    """timm's plain norm classes (same computation as torch's), when timm is installed."""
    try:
        from timm.layers import norm
    except ImportError:
        return {}
    pairs = {
        "LayerNorm": SigmaLayerNorm,
        "LayerNormFp32": SigmaLayerNorm,
        "LayerNorm2d": SigmaLayerNorm2d,
        "LayerNorm2dFp32": SigmaLayerNorm2d,
        "RmsNorm": SigmaRMSNorm,
        "RmsNormFp32": SigmaRMSNorm,
    }
    return {getattr(norm, n): s for n, s in pairs.items() if hasattr(norm, n)}


#: Exact plain type → the σNorm class replacing it.
NORM_REGISTRY: dict[type, type[SigmaNorm]] = {
    nn.BatchNorm1d: SigmaBatchNorm1d,
    nn.BatchNorm2d: SigmaBatchNorm2d,
    nn.BatchNorm3d: SigmaBatchNorm3d,
    nn.SyncBatchNorm: SigmaSyncBatchNorm,
    nn.LayerNorm: SigmaLayerNorm,
    nn.GroupNorm: SigmaGroupNorm,
    nn.RMSNorm: SigmaRMSNorm,
    **_timm_norms(),
}
#: Bases whose unregistered subclasses are refused rather than skipped.
_NORM_BASES = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm, nn.RMSNorm)


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
            f"normalisation layer that σNorm does not convert: it may compute more than the "
            f"norm (timm's BatchNormAct2d/GroupNormAct/LayerNormAct apply an activation, "
            f"which σNorm would drop). Build the backbone with plain norm layers (timm: "
            f"norm_layer=nn.BatchNorm2d and a separate activation)."
        )


def plain_class_for(layer: SigmaNorm) -> type[nn.Module]:
    """The plain class a member of ``layer`` folds back into (the first registered)."""
    for plain, sigma in NORM_REGISTRY.items():
        if type(layer) is sigma:
            return plain
    raise TypeError(f"No plain counterpart for {type(layer).__name__}.")


def fold_signorm(layer: SigmaNorm, member: int) -> nn.Module:
    r"""The ordinary normalisation layer computing member ``member``'s output of ``layer``.

    Its affine is member ``member``'s effective one, :math:`w = k\,s \odot \sigma(\gamma_m)`,
    :math:`b = \beta` (0 from scratch), and a σBN member keeps its running statistics.
    """
    if not 0 <= member < layer.num_estimators:
        raise ValueError(
            f"member must be in 0..{layer.num_estimators - 1} (num_estimators="
            f"{layer.num_estimators}), got {member!r}."
        )
    plain_cls = plain_class_for(layer)
    weight = layer.member_scale()[member].detach().clone()
    bias = torch.zeros_like(weight) if layer.shift is None else layer.shift.detach().clone()
    if isinstance(layer, SigmaBatchNorm):
        plain = plain_cls(layer.num_features, layer.eps, layer.momentum,
                          track_running_stats=layer.track_running_stats)
        if layer.track_running_stats:
            plain.running_mean.copy_(layer.running_mean[member])
            plain.running_var.copy_(layer.running_var[member])
            plain.num_batches_tracked.copy_(layer.num_batches_tracked)
    elif isinstance(layer, SigmaGroupNorm):
        plain = plain_cls(layer.num_groups, layer.num_features, eps=layer.eps)
    elif isinstance(layer, SigmaRMSNorm):
        if bias.any():
            raise ValueError("An RMSNorm has no shift: this σRMSNorm's β is nonzero.")
        plain = plain_cls(layer.normalized_shape, eps=layer.eps)
        bias = None
    else:  # σLN, channels-first σLN
        shape = layer.normalized_shape if type(layer) is SigmaLayerNorm else layer.num_features
        plain = plain_cls(shape, eps=layer.eps)
    _copy_affine(plain, weight, bias)
    return plain.to(weight.device)


@torch.no_grad()
def _copy_affine(plain: nn.Module, weight: Tensor, bias: Tensor | None) -> None:
    plain.weight.copy_(weight.view_as(plain.weight))
    if bias is not None:
        plain.bias.copy_(bias.view_as(plain.bias))
