"""σNorm layers for the ``normalization_layer=`` argument of TorchUncertainty's builders."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from ..members.wrapper import check_member_count
from .layers import SigmaBatchNorm2d, SigmaGroupNorm, SigmaNorm

__all__ = ["signorm_normalization_layer"]


def signorm_normalization_layer(
    num_estimators: int, layer: type[SigmaNorm] = SigmaBatchNorm2d, **options: Any
) -> Callable[[int], SigmaNorm]:
    """What to pass as ``normalization_layer=`` to TorchUncertainty's ``resnet``,
    ``wideresnet28x10`` and the other builders that call ``normalization_layer(num_features)``.

    Each call builds a from-scratch ``layer(num_features, num_estimators, **options)``, so the
    backbone comes out with σNorm layers of M members;
    :func:`~torch_uncertainty_signorm.signorm_ensemble` with the same ``num_estimators`` keeps
    them (converting any plain norm left) and adds the member heads: the ensemble it makes of
    the plain backbone.

    Args:
        num_estimators: Number of members M.
        layer: The σNorm class, taking ``num_features`` first: ``SigmaBatchNorm2d`` (the
            default, for TorchUncertainty's CNNs), ``SigmaSyncBatchNorm``, ``SigmaLayerNorm2d``.
        **options: Keyword arguments of ``layer`` (``scale_init_std``, ``eps``, ``momentum``).

    Returns:
        A picklable ``functools.partial`` of ``layer``.

    Raises:
        ValueError: If ``num_estimators`` is not an integer in ``1..1024``.
        TypeError: If ``layer`` is not a σNorm class taking ``num_features`` first, or
            ``options`` holds an argument it does not take.

    Example:
        >>> from torch_uncertainty.models.classification import resnet
        >>> backbone = resnet(3, 10, 18, style="cifar",
        ...                   normalization_layer=signorm_normalization_layer(4))
        >>> model = signorm_ensemble(backbone, num_estimators=4)
    """
    num_estimators = check_member_count("num_estimators", num_estimators)
    if not (isinstance(layer, type) and issubclass(layer, SigmaNorm)) or layer is SigmaNorm:
        raise TypeError(
            f"layer must be a σNorm layer class such as SigmaBatchNorm2d, got {layer!r}."
        )
    if issubclass(layer, SigmaGroupNorm):
        raise TypeError(
            "SigmaGroupNorm takes num_groups before num_channels, and TorchUncertainty's "
            "builders call normalization_layer(num_features): pass "
            f"functools.partial(SigmaGroupNorm, <num_groups>, num_estimators={num_estimators})."
        )
    inspect.signature(layer).bind(1, num_estimators, **options)  # names an unknown option
    return functools.partial(layer, num_estimators=num_estimators, **options)
