"""Argument checks shared by the text datamodules: errors name the value and what is valid."""

from __future__ import annotations

from numbers import Integral
from typing import Any

__all__ = ["check_int", "check_text_loading"]


def check_int(name: str, value: Any, low: int) -> None:
    """Raise a ValueError naming ``value`` unless it is an integer ``>= low`` (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}.")


def check_text_loading(num_tta: int, num_workers: int, persistent_workers: bool) -> None:
    """Text has no test-time augmentation; persistent workers need workers."""
    if num_tta != 1:
        raise ValueError(
            f"num_tta must be 1 (text has no test-time augmentation), got {num_tta!r}."
        )
    if persistent_workers and num_workers == 0:
        raise ValueError("persistent_workers=True needs num_workers > 0. Got num_workers=0.")
