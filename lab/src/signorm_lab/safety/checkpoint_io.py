"""Lightning's checkpoints written whole or not at all (:class:`AtomicCheckpointIO`), and read
as a regular file with bounded records."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins import TorchCheckpointIO

from .atomic_files import replaced_atomically, warn_stale_partials

__all__ = ["AtomicCheckpointIO"]


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's ``torch.save`` checkpoints, written with
    :func:`~.atomic_files.replaced_atomically`.

    The ``torch-uncertainty`` command gives it to the trainer (unless a ``CheckpointIO`` plugin
    is configured); with a plain ``Trainer``: ``Trainer(plugins=[AtomicCheckpointIO()])``.
    The first save into a folder names, in a warning, the temporary files that an earlier write
    cut off by SIGKILL left there, without touching them
    (:func:`~.atomic_files.warn_stale_partials`).
    """

    def __init__(self, checked: tuple[str | Path, dict[str, Any]] | None = None) -> None:
        super().__init__()
        self._checked_directories: set[Path] = set()
        #: A checkpoint the command read and checked already: its first load returns it, so
        #: that the weights tested are the weights checked (the file is read once).
        self._checked = checked

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None
    ) -> None:
        if storage_options is not None or "://" in str(path):  # remote storage: Lightning's
            super().save_checkpoint(checkpoint, path, storage_options)
            return
        directory = Path(path).parent
        if directory not in self._checked_directories:
            self._checked_directories.add(directory)
            warn_stale_partials(directory)
        buffer = io.BytesIO()  # serialised first: a full disk is then Python's OSError (ENOSPC),
        torch.save(checkpoint, buffer)  # not torch's zip writer's "unexpected pos"
        with replaced_atomically(path) as partial:
            partial.write_bytes(buffer.getbuffer())

    def load_checkpoint(
        self,
        path: Any,
        map_location: Any = lambda storage, loc: storage,
        weights_only: bool | None = None,
    ) -> dict[str, Any]:
        """As Lightning's for a local file, opened once as a regular file (a pipe swapped in
        after the command's checks is refused, never read) with its compressed records bounded
        (:func:`~signorm_lab.safety.checkpoints.load_torch_file`); the checkpoint given as
        ``checked`` is not read again: its checked content is returned."""
        from .checkpoints import is_url, load_torch_file

        if self._checked is not None and os.path.abspath(self._checked[0]) == os.path.abspath(path):
            content, self._checked = self._checked[1], None
            return content
        if is_url(path):
            return super().load_checkpoint(path, map_location, weights_only)
        if not os.path.lexists(path):
            raise FileNotFoundError(f"Checkpoint file not found: {path}")
        return load_torch_file(
            path, "ckpt_path", map_location, True if weights_only is None else weights_only
        )
