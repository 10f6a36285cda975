"""Selecting layers by name, one grammar for every wrapper (as peft's ``target_modules``): a
preset, a regex matching whole names, or a list of names or name suffixes. σN-Ens's regularized
layers (:func:`~torch_uncertainty_signorm.signorm.layer_selection.select_layers`) and
LoRA-Ensemble's adapted projections use it. A regex given here is the user's own; one read from
an untrusted file is bounded by the lab before anything is built."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

__all__ = ["check_selection", "match_names"]


def _available(names: Sequence[str], shown: int = 20) -> str:
    """The first ``shown`` names, for error messages."""
    if not names:
        return "(none)"
    more = f", ... ({len(names)} in all)" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def match_names(
    names: Sequence[str],
    spec: str | Sequence[str],
    *,
    argument: str,
    kind: str,
    presets: Mapping[str, str | None] | None = None,
) -> list[str]:
    """The ``names`` that ``spec`` selects, in the order of ``names``.

    Args:
        names: Qualified module names to choose from.
        spec: A key of ``presets`` (a regex, or ``None`` for every name); otherwise a string
            is a regex that must match a whole name, and a list holds names or name suffixes
            of whole components (``"bn2"`` matches ``"layer1.0.bn2"``), each of which must
            match at least one name.
        argument: The argument's name, for error messages (``"regularized_layers"``).
        kind: What the names are, for error messages (``"σNorm layer"``).
        presets: The named selections ``spec`` may give.

    Raises:
        ValueError: If the spec is invalid, or a preset, regex or list entry matches nothing.
    """
    presets = presets or {}
    if isinstance(spec, str):
        if spec in presets:
            pattern = presets[spec]
            if pattern is None:
                return list(names)
            what = f"preset {spec!r}"
        else:
            try:
                pattern = re.compile(spec).pattern
            except re.error as error:
                raise ValueError(
                    f"{argument}={spec!r} is neither a preset ({', '.join(presets) or 'none'}) "
                    f"nor a valid regex: {error}."
                ) from None
            what = f"pattern {spec!r}"
        selected = [name for name in names if re.fullmatch(pattern, name)]
        if not selected:
            raise ValueError(
                f"{argument} {what} matches no {kind}. Presets: {', '.join(presets) or 'none'}. "
                f"Available layers: {_available(names)}."
            )
        return selected
    check_selection(argument, spec)
    for entry in spec:
        if not any(name == entry or name.endswith("." + entry) for name in names):
            raise ValueError(
                f"{argument} entry {entry!r} matches no {kind}. "
                f"Available layers: {_available(names)}."
            )
    return [n for n in names if any(n == e or n.endswith("." + e) for e in spec)]


def check_selection(argument: str, spec: Any, presets: Collection[str] = ()) -> None:
    """Refuse a ``spec`` that is neither a string (a preset, or a valid regex) nor a non-empty
    list of strings (names or name suffixes)."""
    if isinstance(spec, str):
        if spec not in presets:
            try:
                re.compile(spec)
            except re.error as error:
                raise ValueError(f"{argument}={spec!r} is not a valid regex: {error}.") from None
        return
    if not isinstance(spec, Sequence) or not spec or not all(isinstance(s, str) for s in spec):
        raise ValueError(
            f"{argument} must be a preset name, a regex or a non-empty list of layer "
            f"names, got {spec!r}."
        )
