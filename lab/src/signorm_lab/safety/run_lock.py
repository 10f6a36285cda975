"""One process at a time in a run's folder: an advisory lock on ``<folder>/run.lock``.

Two commands given the same output folder (two shells, two ``signorm-compare`` processes split
by method, each of which also runs the reference) would otherwise train the same run into one
folder; with the lock, the second waits for the first and then finds the run finished. The lock
is the operating system's (``flock`` on POSIX, ``msvcrt.locking`` on
Windows), so it is released when its process ends, however it ends: a killed run leaves no
stale lock behind. The lock belongs to the open file, so a child process handed the descriptor
(:func:`run_folder_lock` yields it) holds it as long as it lives, even past its parent.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILENAME = "run.lock"
#: How often a waiting process tries the lock again.
POLL_SECONDS = 1.0

if os.name == "nt":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


class RunFolderBusyError(RuntimeError):
    """Another process holds the run folder's lock."""


def _open_lock(folder: Path) -> int:
    """The lock file's descriptor, refusing a folder that is a file, and a lock file that is a
    link or a folder (no lock this package writes), in one line."""
    lock = folder / LOCK_FILENAME
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise RuntimeError(
            f"{folder}: is a file, not a run folder; move it away and run again."
        ) from None
    try:
        return os.open(lock, os.O_CREAT | os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
    except OSError as error:  # a symbolic link (ELOOP), a folder (EISDIR), no permission
        what = "a symbolic link" if lock.is_symlink() else error.strerror
        raise RuntimeError(
            f"{lock}: {what}, not the lock file of a run; remove it and run again."
        ) from None


@contextmanager
def run_folder_lock(
    folder: str | Path, on_busy: Callable[[str], None] | None = None
) -> Iterator[int]:
    """Hold ``folder``'s lock for the block, which gets the lock's descriptor. When another
    process holds it: without ``on_busy``, raise :class:`RunFolderBusyError` at once, naming the
    folder; with it, call it once with that message, then wait until the lock is released. The
    lock file is left in place (removing it would let a third process lock a new file of the
    same name while the second still holds the old one).

    Raises:
        RuntimeError: In one line, when ``folder`` is a file or its lock file is a link or a
            folder.
    """
    folder = Path(folder)
    fd = _open_lock(folder)
    try:
        if not _try_lock(fd):
            message = f"another process is running in {folder} (it holds {folder / LOCK_FILENAME})"
            if on_busy is None:
                raise RunFolderBusyError(message)
            on_busy(message)
            while not _try_lock(fd):
                time.sleep(POLL_SECONDS)
        yield fd
    finally:
        os.close(fd)
