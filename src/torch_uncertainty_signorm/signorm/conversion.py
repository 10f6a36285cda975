"""The walk that swaps every normalization layer of a backbone for its σNorm counterpart."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import torch
from torch import Tensor, nn

from ..members.replace import replace_modules
from ..utils.checks import check_positive_number
from .layers import SigmaNorm
from .registry import check_norm_type, signorm_class_for

__all__ = [
    "SUPPORTED_NORMS",
    "convert_norm_layers",
    "find_norm_layers",
    "norms_at_initial_state",
    "signorm_class_for",
]

#: Human-readable list of the layers :func:`convert_norm_layers` replaces (exact types,
#: ``layers.registry.NORM_REGISTRY``).
SUPPORTED_NORMS = (
    "BatchNorm1d/2d/3d, SyncBatchNorm, LayerNorm (torch, timm, transformers), "
    "timm LayerNorm2d, GroupNorm (torch, timm), RMSNorm (torch, timm), timm's LayerNormFp32/"
    "LayerNorm2dFp32/RmsNormFp32"
)
#: What a freshly built normalization layer holds (torch, timm and transformers alike).
_INITIAL_STATE = {
    "weight": 1.0,
    "bias": 0.0,
    "running_mean": 0.0,
    "running_var": 1.0,
    "num_batches_tracked": 0,
}


def find_norm_layers(model: nn.Module) -> list[str]:
    """Qualified names of the supported normalization layers of ``model``, in module order.

    Raises:
        ValueError: If ``model`` holds none, or already holds σNorm layers.
        TypeError: If it holds a subclass of a norm that the registry does not list (timm's
            ``BatchNormAct2d``: an activation σNorm would drop).
    """
    converted = [name for name, m in model.named_modules() if isinstance(m, SigmaNorm)]
    if converted:
        listed = ", ".join(repr(name) for name in converted[:3])
        raise ValueError(
            f"{type(model).__name__} is already converted to σNorm (σNorm layers: {listed}"
            f"{', ...' if len(converted) > 3 else ''}): pass the original backbone, or use "
            f"this model as it is."
        )
    names = []
    for name, module in model.named_modules(remove_duplicate=False):
        check_norm_type(name, module)
        if name and signorm_class_for(module) is not None:
            names.append(name)
    if not names:
        raise ValueError(
            f"{type(model).__name__} has no normalization layer to convert into σNorm; "
            f"σNorm-Ensembles need at least one of: {SUPPORTED_NORMS}."
        )
    return names


def norms_at_initial_state(state: Mapping[str, Tensor], norm_names: Sequence[str]) -> bool:
    """Whether every normalization layer in ``state`` still holds a fresh layer's values.

    Scale 1, shift 0 and untouched BatchNorm statistics everywhere mean that no trained
    weights were loaded. Layers without affine or statistics carry no evidence: ``False``
    when no layer carries any.
    """
    entries = [
        (state[f"{name}.{key}"], value)
        for name in norm_names
        for key, value in _INITIAL_STATE.items()
        if isinstance(state.get(f"{name}.{key}"), Tensor)
    ]
    return bool(entries) and all(bool(torch.all(t == value)) for t, value in entries)


def convert_norm_layers(
    model: nn.Module,
    num_estimators: int,
    *,
    pretrained: bool = False,
    scale_init_std: float = 1.0,
    member_spread: float = 0.0,
    spread_layers: Collection[str] | None = None,
) -> dict[str, SigmaNorm]:
    """Replace, in place, every supported normalization layer of ``model`` by a σNorm layer.

    The targets are collected first and each is replaced through its parent, so nested
    modules, ``nn.Sequential``/``nn.ModuleList`` children and a layer registered under
    several parents are all handled (the shared layer becomes one shared σNorm layer).

    Args:
        model: The backbone, modified in place.
        num_estimators: Number of members M.
        pretrained: Output-preserving conversion (``True``) or from-scratch σNorm.
        scale_init_std: Standard deviation of the from-scratch scale logits.
        member_spread: Standard deviation of the zero-sum per-member offsets added to the
            scale logits of ``spread_layers`` (:meth:`SigmaNorm.spread_members`), so that a
            converted model's identical members leave the point where the regularizer has no
            gradient. ``0`` (default) keeps the conversion exact.
        spread_layers: Names of the converted layers to spread; every converted layer when
            ``None``.

    Returns:
        The new σNorm layers by their qualified name in ``model``.

    Raises:
        ValueError: If ``model`` holds no supported normalization layer, ``member_spread`` is
            no finite number >= 0, or ``spread_layers`` names a layer that was not converted.
    """
    names = find_norm_layers(model)
    unknown = sorted(set(spread_layers or ()) - set(names))
    if unknown:
        raise ValueError(
            f"spread_layers names {unknown}, which are not normalization layers of "
            f"{type(model).__name__}; valid names: {names}."
        )
    check_positive_number("member_spread", member_spread, allow_zero=True)
    converted = replace_modules(
        model,
        names,
        lambda module: signorm_class_for(module).from_module(
            module, num_estimators, pretrained=pretrained, scale_init_std=scale_init_std
        ),
    )
    targets = names if spread_layers is None else spread_layers
    for layer in {id(converted[n]): converted[n] for n in targets}.values():  # shared: once
        layer.spread_members(member_spread)
    return converted
