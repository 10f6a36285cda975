"""Files written whole or not at all: a temporary file in the destination folder, flushed to
disk, then renamed over the final name (a rename within one filesystem is atomic).

A write cut off (a full disk, SIGKILL, a power cut) then never leaves a truncated file under the
final name; on an error the temporary file is removed. Lightning's own save writes through
fsspec, which on another filesystem than ``$TMPDIR`` copies to the final name.
"""

from __future__ import annotations

import io
import os
import re
import secrets
import shutil
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins import TorchCheckpointIO

__all__ = [
    "AtomicCheckpointIO", "remove_stale_partials", "replaced_atomically", "replaced_folder",
    "stale_partials",
]

#: The temporary names :func:`replaced_atomically` and :func:`replaced_folder` write under.
_PARTIAL = re.compile(r"\..+\.[0-9a-f]{8}\.(partial|old)")
#: When this process started: a temporary file older than it was left by another process.
_STARTED = time.time()


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


def stale_partials(directory: str | Path, before: float | None = None) -> list[Path]:
    """The temporary files and folders (``.<name>.<hex>.partial``) that a write cut off by
    SIGKILL or a power cut left in ``directory`` before ``before`` (default: when this process
    started); nothing is removed."""
    directory, before = Path(directory), _STARTED if before is None else before
    try:
        entries = list(directory.iterdir())
    except OSError:
        return []
    found = []
    for entry in entries:
        try:
            if _PARTIAL.fullmatch(entry.name) and entry.lstat().st_mtime < before:
                found.append(entry)
        except OSError:
            continue
    return found


def remove_stale_partials(directory: str | Path, before: float | None = None) -> list[Path]:
    """Remove the temporary files and folders (``.<name>.<hex>.partial``) that a write cut off
    by SIGKILL or a power cut left in ``directory`` before ``before`` (default: when this
    process started), and warn naming them; returns them."""
    directory = Path(directory)
    removed = []
    for entry in stale_partials(directory, before):
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        except OSError:
            continue
        removed.append(entry)
    if removed:
        warnings.warn(
            f"removed {len(removed)} partial file(s) left in {directory} by a write that was cut "
            f"off (SIGKILL, a power cut): {', '.join(p.name for p in removed[:5])}"
            f"{', ...' if len(removed) > 5 else ''}.", stacklevel=2)
    return removed


@contextmanager
def replaced_folder(path: str | Path) -> Iterator[Path]:
    """Yield a new temporary folder beside the folder ``path``; once the block has filled it,
    it takes ``path``'s place whole: the previous folder is renamed aside, the new one renamed
    to ``path``, then the previous one removed. A reader never sees the two mixed; on any error
    (SIGTERM included, where the command turns it into an exception) the new folder is removed
    and ``path`` is left as it was. Stale folders of writes cut off earlier are removed first
    (:func:`remove_stale_partials`); a previous folder that such a write had renamed aside
    without putting the new one in place (cut off between the two renames) is put back first.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _restore_previous(path)
    remove_stale_partials(path.parent)
    token = secrets.token_hex(4)
    partial, old = (path.with_name(f".{path.name}.{token}.partial"),
                    path.with_name(f".{path.name}.{token}.old"))
    partial.mkdir()
    try:
        yield partial
        for entry in partial.iterdir():
            if entry.is_file() and not entry.is_symlink():
                with entry.open("rb") as file:
                    os.fsync(file.fileno())
        _sync_directory(partial)
        if path.is_dir() and not path.is_symlink():
            os.rename(path, old)
        try:
            os.rename(partial, path)
        except BaseException:
            if old.exists():
                os.rename(old, path)
            raise
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    _sync_directory(path.parent)
    shutil.rmtree(old, ignore_errors=True)


def _restore_previous(path: Path) -> None:
    """Put back the previous folder of a :func:`replaced_folder` cut off (SIGKILL, a power cut)
    between its two renames: ``path`` is missing and its previous content lies aside as
    ``.<name>.<hex>.old``; the newest such folder is renamed back to ``path``, with a warning."""
    if os.path.lexists(path):
        return
    aside = re.compile(rf"\.{re.escape(path.name)}\.[0-9a-f]{{8}}\.old")
    candidates = [entry for entry in stale_partials(path.parent) if aside.fullmatch(entry.name)
                  and entry.is_dir() and not entry.is_symlink()]
    if not candidates:
        return
    previous = max(candidates, key=lambda entry: entry.lstat().st_mtime)
    os.rename(previous, path)
    warnings.warn(f"{path} was missing: a replacement cut off (SIGKILL, a power cut) between "
                  f"its two renames had left it aside as {previous.name}; put back.", stacklevel=3)


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
    The first save into a folder removes the partial files that an earlier write cut off by
    SIGKILL left there, with a warning naming them (:func:`remove_stale_partials`).
    """

    def __init__(self) -> None:
        super().__init__()
        self._checked_directories: set[Path] = set()

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any,
                        storage_options: Any | None = None) -> None:
        if storage_options is not None or "://" in str(path):  # remote storage: Lightning's
            super().save_checkpoint(checkpoint, path, storage_options)
            return
        directory = Path(path).parent
        if directory not in self._checked_directories:
            self._checked_directories.add(directory)
            remove_stale_partials(directory)
        buffer = io.BytesIO()  # serialised first: a full disk is then Python's OSError (ENOSPC),
        torch.save(checkpoint, buffer)  # not torch's zip writer's "unexpected pos"
        with replaced_atomically(path) as partial:
            partial.write_bytes(buffer.getbuffer())

    def load_checkpoint(self, path: Any, map_location: Any = lambda storage, loc: storage,
                        weights_only: bool | None = None) -> dict[str, Any]:
        """As Lightning's for a local file, opened once as a regular file (a pipe swapped in
        after the command's checks is refused, never read) with its compressed records bounded
        (:func:`~torch_uncertainty_signorm.safety.checkpoints.load_torch_file`)."""
        from .checkpoints import is_url, load_torch_file

        if is_url(path):
            return super().load_checkpoint(path, map_location, weights_only)
        if not os.path.lexists(path):
            raise FileNotFoundError(f"Checkpoint file not found: {path}")
        return load_torch_file(path, "ckpt_path", map_location,
                               True if weights_only is None else weights_only)
