"""The layers σN-Ens's regularizer acts on: the paper's presets, or any selection of
:mod:`~torch_uncertainty_signorm.members.selection`'s grammar."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..members.selection import check_selection, match_names

__all__ = ["REGULARIZED_LAYER_PRESETS", "check_regularized_layers", "select_layers"]

#: Presets of the paper (Appendix "Implementation details"), as regexes on layer names.
REGULARIZED_LAYER_PRESETS: dict[str, str | None] = {
    # every σNorm layer of the backbone
    "all": None,
    # ResNet-18: the second normalization layer of each residual block
    "resnet18": r"(.*\.)?layer\d+\.\d+\.bn2",
    # ResNet-50: the first and the last normalization layer of each bottleneck block
    "resnet50": r"(.*\.)?layer\d+\.\d+\.bn[13]",
    # WideResNet-28-10: the first normalization layer of each residual block
    "wideresnet28x10": r"(.*\.)?layer\d+\.\d+\.bn1",
    # Transformers: the FFN-block norms (timm ViT pre-MLP norm2, BERT post-FFN LayerNorm)
    "transformer": r"(.*\.)?(blocks\.\d+\.norm2|layer\.\d+\.output\.LayerNorm)",
}


def check_regularized_layers(spec: Any) -> None:
    """Refuse a ``regularized_layers`` that is neither a preset, a bounded regex nor a
    non-empty list of names
    (:func:`~torch_uncertainty_signorm.members.selection.check_selection`)."""
    check_selection("regularized_layers", spec, REGULARIZED_LAYER_PRESETS)


def select_layers(names: Sequence[str], spec: str | Sequence[str]) -> list[str]:
    """The σNorm layers the regularizer acts on, by :func:`match_names` with the paper's presets.

    Args:
        names: The σNorm layer names to choose from (qualified names in the backbone).
        spec: A preset of :data:`REGULARIZED_LAYER_PRESETS`, a regex matching whole names, or
            a list of names or name suffixes.

    Returns:
        The selected names, in the order of ``names``.

    Raises:
        ValueError: If the spec is invalid, or a preset, regex or list entry matches nothing.
    """
    return match_names(
        names,
        spec,
        argument="regularized_layers",
        kind="σNorm layer",
        presets=REGULARIZED_LAYER_PRESETS,
    )
