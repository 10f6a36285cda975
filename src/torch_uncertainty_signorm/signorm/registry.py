"""The one registry of normalization types: which σNorm layer replaces which plain layer.

Conversion (:mod:`~torch_uncertainty_signorm.signorm.conversion`) reads :data:`NORM_REGISTRY`,
which the σNorm layers fill where they are defined (:func:`register_norm`); the way back is each
σNorm layer's own ``to_plain(member)``
(:class:`~torch_uncertainty_signorm.members.norm.MemberNorm`), whose plain class the registry
maps back to the same σNorm class. Types match *exactly*: a
subclass may change what the layer computes (timm's ``BatchNormAct2d``, ``GroupNormAct`` and
``LayerNormAct`` apply an activation after the norm, which a σNorm layer would silently drop;
timm's ``*Fp32`` norms compute in float32, which their own σNorm classes do too), so an
unregistered subclass of a supported norm is refused by :func:`check_norm_type` with an error
naming it.
"""

from __future__ import annotations

from torch import nn

from ..utils import _compat

__all__ = ["NORM_REGISTRY", "check_norm_type", "register_norm", "signorm_class_for"]

#: Exact plain type → the σNorm class replacing it. Each σNorm layer registers the plain layers
#: it replaces where it is defined (:mod:`~torch_uncertainty_signorm.signorm.layers`): torch's
#: norms, and timm's where timm is installed.
NORM_REGISTRY: dict[type, type[nn.Module]] = {}


def register_norm(plain: type[nn.Module], replacement: type[nn.Module]) -> None:
    """Record that ``replacement`` replaces layers of exactly the type ``plain``.

    Raises:
        ValueError: If another σNorm class replaces ``plain`` already.
    """
    if NORM_REGISTRY.get(plain, replacement) is not replacement:
        raise ValueError(
            f"{plain.__qualname__} is replaced by {NORM_REGISTRY[plain].__name__} already; "
            f"one σNorm class replaces each plain layer."
        )
    NORM_REGISTRY[plain] = replacement


#: Bases whose unregistered subclasses are refused rather than skipped.
_NORM_BASES = (*_compat.BATCH_NORMS, nn.LayerNorm, nn.GroupNorm, nn.RMSNorm)


def signorm_class_for(module: nn.Module) -> type[nn.Module] | None:
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
