"""The walk that swaps every normalization layer of a backbone for its σNorm counterpart."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import torch
from torch import Tensor, nn

from ..members.replace import replace_modules
from ..members.wrapper import MemberWrapper
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
    """Qualified names of the normalization layers of ``model`` that σN-Ens makes per-member, in
    module order: the supported plain norms, and σNorm layers built in (by a TorchUncertainty
    builder given :func:`~torch_uncertainty_signorm.signorm_normalization_layer`).

    Raises:
        ValueError: If ``model`` holds none, or is already an ensemble of members.
        TypeError: If it holds a subclass of a norm that the registry does not list (timm's
            ``BatchNormAct2d``: an activation σNorm would drop).
    """
    wrapper = next((m for m in model.modules() if isinstance(m, MemberWrapper)), None)
    if wrapper is not None:
        raise ValueError(
            f"{type(model).__name__} is already an ensemble ({type(wrapper).__name__} of "
            f"{wrapper.num_estimators} members): pass the original backbone, or use this model "
            f"as it is."
        )
    names = []
    for name, module in model.named_modules(remove_duplicate=False):
        check_norm_type(name, module)
        if name and (isinstance(module, SigmaNorm) or signorm_class_for(module) is not None):
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
    weights were loaded. Layers without affine or statistics, and σNorm layers (built in, they
    hold no pretrained affine), carry no evidence: ``False`` when no layer carries any.
    """
    entries = [
        (state[f"{name}.{key}"], value)
        for name in norm_names
        if f"{name}.scale_logits" not in state
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
    σNorm layers already in ``model`` (built in by ``normalization_layer=``) are kept as they
    are when they hold ``num_estimators`` members.

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
        Every σNorm layer of ``model`` (new and kept) by its qualified name, in module order.

    Raises:
        ValueError: If ``model`` holds no supported normalization layer, ``member_spread`` is
            no finite number >= 0, ``spread_layers`` names a layer that was not converted, or
            a σNorm layer already in ``model`` holds another number of members, or with
            ``pretrained=True`` (it has no pretrained affine to reproduce).
    """
    names = find_norm_layers(model)
    unknown = sorted(set(spread_layers or ()) - set(names))
    if unknown:
        raise ValueError(
            f"spread_layers names {unknown}, which are not normalization layers of "
            f"{type(model).__name__}; valid names: {names}."
        )
    check_positive_number("member_spread", member_spread, allow_zero=True)
    built_in = {n: m for n in names if isinstance(m := model.get_submodule(n), SigmaNorm)}
    _check_built_in(model, built_in, num_estimators, pretrained)
    replaced = replace_modules(
        model,
        [name for name in names if name not in built_in],
        lambda module: signorm_class_for(module).from_module(
            module, num_estimators, pretrained=pretrained, scale_init_std=scale_init_std
        ),
    )
    layers = {**replaced, **built_in}
    converted = {name: layers[name] for name in names}  # module order
    targets = names if spread_layers is None else spread_layers
    for layer in {id(converted[n]): converted[n] for n in targets}.values():  # shared: once
        layer.spread_members(member_spread)
    return converted


def _check_built_in(
    model: nn.Module, built_in: Mapping[str, SigmaNorm], num_estimators: int, pretrained: bool
) -> None:
    """σNorm layers already in ``model`` are kept only as the conversion would build them: with
    ``num_estimators`` members, from scratch."""
    others = {
        n: m.num_estimators for n, m in built_in.items() if m.num_estimators != num_estimators
    }
    if others:
        listed = ", ".join(f"{name!r} (M = {count})" for name, count in list(others.items())[:3])
        raise ValueError(
            f"{type(model).__name__} holds σNorm layers of another number of members than "
            f"num_estimators={num_estimators}: {listed}{', ...' if len(others) > 3 else ''}. "
            f"Build them with signorm_normalization_layer({num_estimators}), or pass "
            f"num_estimators={next(iter(others.values()))}."
        )
    if pretrained and built_in:
        raise ValueError(
            f"pretrained=True makes every member reproduce the backbone's trained normalization "
            f"layers, but {type(model).__name__} already holds σNorm layers (first: "
            f"{next(iter(built_in))!r}), which have no trained affine to reproduce: build the "
            f"backbone with its plain normalization layers and load its weights, or pass "
            f"pretrained=False."
        )
