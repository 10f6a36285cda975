"""Files written whole or not at all: a temporary file in the destination folder, flushed to
disk, then renamed over the final name (a rename within one filesystem is atomic).

A write cut off (a full disk, SIGKILL, a power cut) then never leaves a truncated file under the
final name; on an error the temporary file is removed. Lightning's own save writes through
fsspec, which on another filesystem than ``$TMPDIR`` copies to the final name.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import stat
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .files import current_umask

__all__ = [
    "replaced_atomically",
    "replaced_folder",
    "stale_partials",
    "temporary_name",
    "warn_stale_partials",
]

#: The temporary names :func:`replaced_atomically` and :func:`replaced_folder` write under:
#: ``.<name>.<pid>-<16 hex>.partial`` (and ``.old`` for a folder renamed aside), the pid and
#: random token of the process that created it. Such names are only ever *named* to the user
#: when another process left them; a process removes only the entries it created itself.
_PARTIAL = re.compile(r"\..+\.(\d+)-[0-9a-f]{16}\.(partial|old)")
#: When this process started: a temporary file older than it was left by another process.
_STARTED = time.time()


def temporary_name(path: Path, kind: str) -> Path:
    """A new temporary name beside ``path`` carrying this process's token (its pid and 64
    random bits): ``.<name>.<pid>-<hex>.<kind>``; nobody else creates such a name."""
    return path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(8)}.{kind}")


@contextmanager
def replaced_atomically(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; once the block has written it, it is flushed to
    disk and renamed to ``path``. On any error it is removed and ``path`` is left as it was.

    The temporary file is created new (``O_EXCL``: never an existing file, never through a
    symbolic link), and the rename replaces the *name* ``path``: a symbolic or hard link found
    there is replaced, the file it leads to (another folder's, a user's) is never written.

    Example:
        >>> with replaced_atomically("run/checkpoints/last.ckpt") as partial:
        ...     torch.save(state, partial)
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = temporary_name(path, "partial")
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0)
    os.close(os.open(partial, flags, 0o666))  # umask applies
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
    """The temporary files and folders (``.<name>.<pid>-<hex>.partial`` or ``.old``) that a
    write cut off by SIGKILL or a power cut left in ``directory`` before ``before`` (default:
    when this process started); nothing is touched."""
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


def warn_stale_partials(directory: str | Path, before: float | None = None) -> list[Path]:
    """Warn naming the temporary files (:func:`stale_partials`) that another process's write,
    cut off by SIGKILL or a power cut, left in ``directory``; returns them.

    They are left where they are: only the process that created a temporary file removes it
    (a name alone never proves whose a file is: a user's ``.bashrc.20240101.old`` or a folder
    unpacked from an archive may look like one)."""
    directory = Path(directory)
    found = stale_partials(directory, before)
    if found:
        warnings.warn(
            f"{len(found)} temporary file(s) left in {directory} by a write that was cut off "
            f"(SIGKILL, a power cut) or by another process: "
            f"{', '.join(p.name for p in found[:5])}{', ...' if len(found) > 5 else ''}; left "
            f"untouched: delete them once no process writes there.",
            stacklevel=2,
        )
    return found


@contextmanager
def replaced_folder(path: str | Path) -> Iterator[Path]:
    """Yield a new temporary folder beside the folder ``path``; once the block has filled it,
    it takes ``path``'s place whole: the previous folder is renamed aside, the new one renamed
    to ``path``, then the previous one removed. A reader never sees the two mixed; on any error
    (SIGTERM included, where the command turns it into an exception) the new folder is removed
    and ``path`` is left as it was.

    The new folder takes the previous folder's mode (a ``0700`` folder stays private; a
    setgid one stays setgid), and its owner and group where this process may set them. Both
    temporary names carry this process's token (:func:`temporary_name`) and only they are ever
    removed: folders other processes left beside ``path`` (a write cut off between the two
    renames leaves the previous export aside as ``.<name>.<pid>-<hex>.old``) are named in a
    warning, never moved or removed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not os.path.lexists(path) and (
        aside := [
            entry.name
            for entry in stale_partials(path.parent)
            if entry.name.startswith(f".{path.name}.") and entry.name.endswith(".old")
        ]
    ):
        warnings.warn(
            f"{path} is missing and {', '.join(aside[:3])} lies beside it: perhaps a "
            f"replacement cut off (SIGKILL, a power cut) between its two renames; "
            f"left untouched (rename it back by hand if it is the previous "
            f"content).",
            stacklevel=3,
        )
    partial, old = temporary_name(path, "partial"), temporary_name(path, "old")
    previous = path.lstat() if path.is_dir() and not path.is_symlink() else None
    partial.mkdir(mode=0o700)
    try:
        if previous is not None:  # its owner and group, and its setgid bit: files written
            _take_owner(partial, previous)  # into it take its group, as they did there
            os.chmod(partial, 0o700 | (stat.S_IMODE(previous.st_mode) & stat.S_ISGID))
        yield partial
        for entry in partial.iterdir():
            if entry.is_file() and not entry.is_symlink():
                with entry.open("rb") as file:
                    os.fsync(file.fileno())
        _sync_directory(partial)
        # the mode last, once filled: a read-only folder's too
        os.chmod(partial, stat.S_IMODE(previous.st_mode) if previous else 0o777 & ~current_umask())
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


def _take_owner(folder: Path, previous: os.stat_result) -> None:
    """Give ``folder`` the owner and group of ``previous`` where this process may (the owner
    as root only; a group the user belongs to), as ``cp -p`` does."""
    for owner in (previous.st_uid, -1):
        try:
            os.chown(folder, owner, previous.st_gid)
            return
        except PermissionError:
            continue


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
