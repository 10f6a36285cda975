"""Loading checks shared by the text datamodules (numbers: :mod:`..checks`)."""

from __future__ import annotations

__all__ = ["check_text_loading"]


def check_text_loading(num_tta: int, num_workers: int, persistent_workers: bool) -> None:
    """Text has no test-time augmentation; persistent workers need workers."""
    if num_tta != 1:
        raise ValueError(
            f"num_tta must be 1 (text has no test-time augmentation), got {num_tta!r}."
        )
    if persistent_workers and num_workers == 0:
        raise ValueError("persistent_workers=True needs num_workers > 0. Got num_workers=0.")
