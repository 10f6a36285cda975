"""Argument checks used where arguments enter: errors name the value and what is valid.

A boolean is never a number here (``True`` is no ``num_estimators``, ``tau`` or ``lr``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from numbers import Integral, Real
from typing import Any

__all__ = [
    "check_choices",
    "check_fraction",
    "check_integer",
    "check_positive_number",
    "check_stage",
]


def check_integer(name: str, value: Any, low: int = 1, high: int | None = None) -> int:
    """``value`` as an int if it is an integer in ``[low, high]`` (not a bool), else ValueError."""
    valid = isinstance(value, Integral) and not isinstance(value, bool) and value >= low
    if not valid or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in {low}..{high}"
        raise ValueError(f"{name} must be an integer {bound}, got {value!r}.")
    return int(value)


def check_positive_number(name: str, value: Any, allow_zero: bool = False) -> float:
    """``value`` as a float if it is a finite number > 0 (>= 0 with ``allow_zero``), not a bool."""
    valid = isinstance(value, Real) and not isinstance(value, bool)
    valid = valid and math.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not valid:
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}.")
    return float(value)


def check_fraction(name: str, value: Any) -> float:
    """``value`` as a float if it is a number strictly between 0 and 1 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not 0 < value < 1:
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}.")
    return float(value)


def check_choices(name: str, values: str | Iterable[str], valid: Iterable[str]) -> tuple[str, ...]:
    """``values`` (one name or several) as a tuple if they are distinct names of ``valid``."""
    values = (values,) if isinstance(values, str) else tuple(values)
    valid = tuple(valid)
    unknown = [value for value in values if value not in valid]
    if not values or unknown or len(set(values)) != len(values):
        raise ValueError(
            f"Unknown, missing or repeated {name} {unknown or list(values)}; valid names: "
            f"{list(valid)}."
        )
    return values


def check_stage(stage: str | None) -> None:
    """Refuse a ``setup`` stage other than fit, validate, test or None (all): no predict split."""
    if stage not in ("fit", "validate", "test", None):
        raise ValueError(
            f"Stage {stage!r} is not supported; use 'fit', 'validate', 'test' or None."
        )
