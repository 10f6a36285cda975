"""Files written through libraries get the permissions the user's umask gives any other file."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["follow_umask"]


def _umask() -> int:
    mask = os.umask(0o022)  # the only way to read the umask is to set it
    os.umask(mask)
    return mask


def follow_umask(path: str | Path) -> Path:
    """Set ``path``'s mode to ``0o666`` less the umask, as ``open(path, "w")`` would.

    safetensors writes its files with mode ``0o600`` whatever the umask, so an exported model
    would not be readable by the group that reads its ``config.json``.
    """
    path = Path(path)
    os.chmod(path, 0o666 & ~_umask())
    return path
