"""Files written whole or not at all: a temporary file in the destination folder, flushed to
disk, then renamed over the final name (a rename within one filesystem is atomic).

A write cut off (a full disk, SIGKILL, a power cut) then never leaves a truncated file under the
final name; on an error the temporary file is removed. Lightning's own save writes through
fsspec, which on another filesystem than ``$TMPDIR`` copies to the final name.
"""

from __future__ import annotations

import io
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins import TorchCheckpointIO

__all__ = ["AtomicCheckpointIO", "replaced_atomically"]


@contextmanager
def replaced_atomically(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; once the block has written it, it is flushed to
    disk and renamed to ``path``. On any error it is removed and ``path`` is left as it was.

    Example:
        >>> with replaced_atomically("run/checkpoints/last.ckpt") as partial:
        ...     torch.save(state, partial)
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}.partial")
    os.close(os.open(partial, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))  # umask applies
    try:
        yield partial
        with partial.open("rb+") as file:
            os.fsync(file.fileno())
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    _sync_directory(path.parent)


def _sync_directory(directory: Path) -> None:
    """Flush the folder's entry of the renamed file (where the platform allows it)."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's ``torch.save`` checkpoints, written with :func:`replaced_atomically`.

    The ``torch-uncertainty`` command gives it to the trainer (unless a ``CheckpointIO`` plugin
    is configured); with a plain ``Trainer``: ``Trainer(plugins=[AtomicCheckpointIO()])``.
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any,
                        storage_options: Any | None = None) -> None:
        if storage_options is not None or "://" in str(path):  # remote storage: Lightning's
            super().save_checkpoint(checkpoint, path, storage_options)
            return
        buffer = io.BytesIO()  # serialised first: a full disk is then Python's OSError (ENOSPC),
        torch.save(checkpoint, buffer)  # not torch's zip writer's "unexpected pos"
        with replaced_atomically(path) as partial:
            partial.write_bytes(buffer.getbuffer())

    def load_checkpoint(self, path: Any, map_location: Any = lambda storage, loc: storage,
                        weights_only: bool | None = None) -> dict[str, Any]:
        """As Lightning's for a local file, opened once as a regular file (a pipe swapped in
        after the command's checks is refused, never read) with its compressed records bounded
        (:func:`~torch_uncertainty_signorm.checkpoints.load_torch_file`)."""
        from .checkpoints import is_url, load_torch_file

        if is_url(path):
            return super().load_checkpoint(path, map_location, weights_only)
        if not os.path.lexists(path):
            raise FileNotFoundError(f"Checkpoint file not found: {path}")
        return load_torch_file(path, "ckpt_path", map_location,
                               True if weights_only is None else weights_only)
