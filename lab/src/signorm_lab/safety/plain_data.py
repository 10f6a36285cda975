"""What counts as data in saved hyper-parameters and exported configurations: one rule."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["is_data", "with_plain_values"]


def is_data(value: Any) -> bool:
    """Whether ``value`` is plain data: ``None``, booleans, numbers and strings, in lists, tuples
    and mappings with string keys. Such a value reads back the same from YAML and JSON, and
    loads with ``torch.load(weights_only=True)``."""
    if isinstance(value, Mapping):
        return all(isinstance(key, str) and is_data(item) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return all(is_data(item) for item in value)
    return value is None or isinstance(value, (bool, int, float, str))


def with_plain_values(value: Any) -> Any:
    """``value`` with enums written as their values and paths as strings, at any depth (in
    lists, tuples and mappings); anything else is left as it is."""
    if isinstance(value, Mapping):
        return {key: with_plain_values(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [with_plain_values(item) for item in value]
    if isinstance(value, enum.Enum):
        return with_plain_values(value.value)
    return str(value) if isinstance(value, Path) else value
