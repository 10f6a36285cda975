"""Which σNorm layers the diversity regulariser acts on: paper presets or name patterns."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["REGULARIZED_LAYER_PRESETS", "select_layers"]

#: Presets of the paper (Appendix "Implementation details"), as regexes on layer names.
REGULARIZED_LAYER_PRESETS: dict[str, str | None] = {
    # every σNorm layer of the backbone
    "all": None,
    # ResNet-18: the second normalisation layer of each residual block
    "resnet18": r"(.*\.)?layer\d+\.\d+\.bn2",
    # ResNet-50: the first and the last normalisation layer of each bottleneck block
    "resnet50": r"(.*\.)?layer\d+\.\d+\.bn[13]",
    # WideResNet-28-10: the first normalisation layer of each residual block
    "wideresnet28x10": r"(.*\.)?layer\d+\.\d+\.bn1",
    # Transformers: the FFN-block norms (timm ViT pre-MLP norm2, BERT post-FFN LayerNorm)
    "transformer": r"(.*\.)?(blocks\.\d+\.norm2|layer\.\d+\.output\.LayerNorm)",
}


def _available(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "(none)"


def select_layers(names: Sequence[str], spec: str | Sequence[str]) -> list[str]:
    """Select layer names by preset, regex or list of names, in the style of peft.

    Args:
        names: The σNorm layer names to choose from (qualified names in the backbone).
        spec: A preset of :data:`REGULARIZED_LAYER_PRESETS`; otherwise a string is a regex
            that must match a whole name, and a list holds names or name suffixes
            (``"bn2"`` matches ``"layer1.0.bn2"``), as peft's ``target_modules``.

    Returns:
        The selected names, in the order of ``names``.

    Raises:
        ValueError: If the spec is invalid, or a preset, regex or list entry matches nothing.
    """
    if isinstance(spec, str):
        if spec in REGULARIZED_LAYER_PRESETS:
            pattern = REGULARIZED_LAYER_PRESETS[spec]
            if pattern is None:
                return list(names)
            what = f"preset {spec!r}"
        else:
            try:
                pattern = re.compile(spec).pattern
            except re.error as error:
                raise ValueError(
                    f"regularized_layers={spec!r} is neither a preset "
                    f"({', '.join(REGULARIZED_LAYER_PRESETS)}) nor a valid regex: {error}."
                ) from None
            what = f"pattern {spec!r}"
        selected = [name for name in names if re.fullmatch(pattern, name)]
        if not selected:
            raise ValueError(
                f"regularized_layers {what} matches no σNorm layer. Presets: "
                f"{', '.join(REGULARIZED_LAYER_PRESETS)}. Available layers: {_available(names)}."
            )
        return selected
    if not isinstance(spec, Sequence) or not spec or not all(isinstance(s, str) for s in spec):
        raise ValueError(
            f"regularized_layers must be a preset name, a regex or a non-empty list of layer "
            f"names, got {spec!r}."
        )
    for entry in spec:
        if not any(name == entry or name.endswith("." + entry) for name in names):
            raise ValueError(
                f"regularized_layers entry {entry!r} matches no σNorm layer. "
                f"Available layers: {_available(names)}."
            )
    return [n for n in names if any(n == e or n.endswith("." + e) for e in spec)]
