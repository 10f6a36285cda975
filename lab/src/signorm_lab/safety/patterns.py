"""Regexes read from files, bounded before use: a layer-selection pattern of a recipe, a
checkpoint or an export must match in bounded time (:func:`check_pattern`), never with the
exponential backtracking of ``(a+)+$``."""

from __future__ import annotations

import re
from typing import Any

from .. import _compat

__all__ = [
    "MAX_PATTERN_LENGTH",
    "MAX_PATTERN_REPEATS",
    "SELECTION_KEYS",
    "check_pattern",
    "check_selection_patterns",
]

#: Bounds on a pattern read from a file: its length, and how many repeats (``*``, ``+``,
#: ``{2,}``) it holds. With no repeat inside a repeat, matching a layer name then takes at most
#: polynomial time of low degree, never the exponential backtracking of ``(a+)+$``.
MAX_PATTERN_LENGTH, MAX_PATTERN_REPEATS = 500, 4
#: The arguments of the method and the baselines that select layers by a regex.
SELECTION_KEYS = ("regularized_layers", "target_modules")

_sre_parser, _sre_constants = _compat.regex_parser()

_REPEATS = {
    _sre_constants.MAX_REPEAT,
    _sre_constants.MIN_REPEAT,
    getattr(_sre_constants, "POSSESSIVE_REPEAT", None),
} - {None}
_ATOMIC_GROUP = getattr(_sre_constants, "ATOMIC_GROUP", object())


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
        elif op is _ATOMIC_GROUP:  # (?>...): walked as a group (Python >= 3.11)
            count += _repeats(value, inside)
        elif op is _sre_constants.GROUPREF:
            raise _Unbounded("a back-reference")
        elif _holds_pattern(value):  # a construct with a body this walk does not know
            raise _Unbounded(f"a construct ({op}) the check does not walk")
    return count


def _holds_pattern(value: Any) -> bool:
    """Whether a parsed item's ``value`` holds a sub-pattern (a body that may repeat)."""
    if isinstance(value, _sre_parser.SubPattern):
        return True
    return isinstance(value, (list, tuple)) and any(_holds_pattern(item) for item in value)


def check_pattern(argument: str, pattern: str) -> str:
    """``pattern`` if it is a valid regex that matches in bounded time: at most
    :data:`MAX_PATTERN_LENGTH` characters and :data:`MAX_PATTERN_REPEATS` repeats, none inside
    another repeat, no alternation inside a repeat, no back-reference.

    Raises:
        ValueError: Naming ``argument``, the pattern, the reason and what is valid.
    """
    valid = (
        f"give a list of layer names, a preset, or a simpler regex (at most "
        f"{MAX_PATTERN_REPEATS} repeats, none inside another, e.g. "
        f"'(.*\\.)?layer[34]\\.\\d+\\.bn2')"
    )
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise ValueError(
            f"{argument}={pattern[:80]!r}... is a pattern of {len(pattern)} "
            f"characters (at most {MAX_PATTERN_LENGTH}); {valid}."
        )
    try:
        count = _repeats(_sre_parser.parse(pattern), inside=False)
    except re.error as error:
        raise ValueError(f"{argument}={pattern!r} is not a valid regex: {error}.") from None
    except _Unbounded as error:
        raise ValueError(
            f"{argument}={pattern!r} holds {error}, whose matching can take "
            f"exponential time; {valid}."
        ) from None
    except RecursionError:
        raise ValueError(f"{argument}={pattern[:80]!r} is nested too deeply; {valid}.") from None
    if count > MAX_PATTERN_REPEATS:
        raise ValueError(
            f"{argument}={pattern!r} holds {count} repeats (at most "
            f"{MAX_PATTERN_REPEATS}), whose matching can take very long; {valid}."
        )
    return pattern


def check_selection_patterns(tree: Any, where: str) -> None:
    """Check every layer-selection regex (:data:`SELECTION_KEYS`) that a configuration read from a
    file gives, at any depth (:func:`check_pattern`; a preset's name, a plain word, is a bounded
    pattern)."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key in SELECTION_KEYS and isinstance(value, str):
                check_pattern(f"{where}.{key}", value)
            else:
                check_selection_patterns(value, f"{where}.{key}")
    elif isinstance(tree, (list, tuple)):
        for index, value in enumerate(tree):
            check_selection_patterns(value, f"{where}[{index}]")
