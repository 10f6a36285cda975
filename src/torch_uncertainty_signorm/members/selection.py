"""Selecting layers by name, one grammar for every wrapper (as peft's ``target_modules``): a
preset, a regex matching whole names, or a list of names or name suffixes. σN-Ens's regularised
layers (:func:`~torch_uncertainty_signorm.signorm.layer_selection.select_layers`) and
LoRA-Ensemble's adapted projections use it."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

__all__ = ["check_pattern", "check_selection", "match_names"]

#: Bounds on a pattern read from a file: its length, and how many repeats (``*``, ``+``,
#: ``{2,}``) it holds. With no repeat inside a repeat, matching a layer name then takes at most
#: polynomial time of low degree, never the exponential backtracking of ``(a+)+$``.
MAX_PATTERN_LENGTH, MAX_PATTERN_REPEATS = 500, 4

try:  # Python >= 3.11
    from re import _constants as _sre_constants
    from re import _parser as _sre_parser
except ImportError:  # pragma: no cover
    import sre_constants as _sre_constants
    import sre_parse as _sre_parser

_REPEATS = {_sre_constants.MAX_REPEAT, _sre_constants.MIN_REPEAT,
            getattr(_sre_constants, "POSSESSIVE_REPEAT", None)} - {None}


class _Unbounded(Exception):
    """What makes a pattern's matching time unbounded (its message)."""


def _repeats(items: Any, inside: bool) -> int:
    """The repeats of parsed pattern ``items`` that may repeat more than once; raises
    :class:`_Unbounded` at a repeat or an alternation inside such a repeat (``inside``)."""
    count = 0
    for op, value in items:
        if op in _REPEATS:
            _low, high, body = value
            many = high is _sre_constants.MAXREPEAT or high > 1
            if many and inside:
                raise _Unbounded("a repeat inside a repeat")
            count += many + _repeats(body, inside or many)
        elif op is _sre_constants.BRANCH:
            if inside:
                raise _Unbounded("an alternation inside a repeat")
            count += sum(_repeats(branch, inside) for branch in value[1])
        elif op is _sre_constants.SUBPATTERN:
            count += _repeats(value[-1], inside)
        elif op in (_sre_constants.ASSERT, _sre_constants.ASSERT_NOT):
            count += _repeats(value[1], inside)
        elif op is _sre_constants.GROUPREF_EXISTS:
            count += sum(_repeats(part, inside) for part in value[1:] if part is not None)
        elif op is _sre_constants.GROUPREF:
            raise _Unbounded("a back-reference")
    return count


def check_pattern(argument: str, pattern: str) -> str:
    """``pattern`` if it is a valid regex that matches in bounded time: at most
    :data:`MAX_PATTERN_LENGTH` characters and :data:`MAX_PATTERN_REPEATS` repeats, none inside
    another repeat, no alternation inside a repeat, no back-reference.

    Raises:
        ValueError: Naming ``argument``, the pattern, the reason and what is valid.
    """
    valid = (f"give a list of layer names, a preset, or a simpler regex (at most "
             f"{MAX_PATTERN_REPEATS} repeats, none inside another, e.g. "
             f"'(.*\\.)?layer[34]\\.\\d+\\.bn2')")
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise ValueError(f"{argument}={pattern[:80]!r}... is a pattern of {len(pattern)} "
                         f"characters (at most {MAX_PATTERN_LENGTH}); {valid}.")
    try:
        count = _repeats(_sre_parser.parse(pattern), inside=False)
    except re.error as error:
        raise ValueError(f"{argument}={pattern!r} is not a valid regex: {error}.") from None
    except _Unbounded as error:
        raise ValueError(f"{argument}={pattern!r} holds {error}, whose matching can take "
                         f"exponential time; {valid}.") from None
    except RecursionError:
        raise ValueError(f"{argument}={pattern[:80]!r} is nested too deeply; {valid}.") from None
    if count > MAX_PATTERN_REPEATS:
        raise ValueError(f"{argument}={pattern!r} holds {count} repeats (at most "
                         f"{MAX_PATTERN_REPEATS}), whose matching can take very long; {valid}.")
    return pattern


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
            check_pattern(argument, pattern)
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
    """Refuse a ``spec`` that is neither a string (preset or regex) nor a non-empty list of
    strings (names or name suffixes); a regex must match in bounded time
    (:func:`check_pattern`)."""
    if isinstance(spec, str):
        if spec not in presets:
            check_pattern(argument, spec)
        return
    if not isinstance(spec, Sequence) or not spec or not all(isinstance(s, str) for s in spec):
        raise ValueError(
            f"{argument} must be a preset name, a regex or a non-empty list of layer "
            f"names, got {spec!r}."
        )
