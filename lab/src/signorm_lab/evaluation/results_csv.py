"""Extra columns in TorchUncertainty's ``results.csv``: the values the lab's callbacks add."""

from __future__ import annotations

import csv
import io
import os
import stat
import warnings
from collections.abc import Mapping
from pathlib import Path

from torch import Tensor

from ..safety.atomic_files import replaced_atomically
from ..safety.files import read_regular

__all__ = ["append_to_last_row", "linked", "results_rows"]

#: A results table a test writes holds a few rows; anything larger is no such table.
_MAX_RESULTS_BYTES = 16 << 20


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return cell == ""
    return True


def _not_updated(path: Path, why: str) -> None:
    warnings.warn(f"'{path}' was not updated with the extra results: {why}.", stacklevel=3)


def linked(path: Path) -> str | None:
    """What ``path`` is when a write to it would land in another file: ``"a symbolic link"``,
    ``"a hard link (another name shares its data)"`` or ``"not a regular file"``; ``None``
    when it is absent or a regular file with one name."""
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(status.st_mode):
        return "a symbolic link"
    if not stat.S_ISREG(status.st_mode):
        return "not a regular file"
    return "a hard link (another name shares its data)" if status.st_nlink > 1 else None


def _rows(path: Path) -> list[list[str]]:
    text = read_regular(path, "results", _MAX_RESULTS_BYTES, "a results CSV").decode()
    return list(csv.reader(io.StringIO(text, newline="")))


def results_rows(path: Path) -> int:
    """The rows below the header of the results CSV at ``path``: 0 when there is none, or it
    cannot be read as one (what follows then refuses it, naming why)."""
    try:
        return max(len(_rows(path)) - 1, 0)
    except (ValueError, OSError, csv.Error):
        return 0


def append_to_last_row(
    path: Path,
    values: Mapping[str, Tensor | float],
    run_dir: Path | None = None,
    rows: int | None = None,
) -> None:
    """Write ``values`` into the last row of the CSV at ``path`` (the row TorchUncertainty's
    ``csv_writer`` just wrote), as ``%.4f`` like its own; new keys become new columns.

    The file is replaced whole (a new file renamed over it), never edited in place, and only
    when it is a results table of the run: a regular file with one name (not a link) inside
    ``run_dir`` whose rows all have the header's fields, and, with ``rows``, that many rows
    below the header (the last one then is the row the caller saw being added). Otherwise it
    is left as it is, with a warning naming it. Nothing happens when there is no such file.
    """
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return
    if run_dir is not None and path.parent.resolve() != Path(run_dir).resolve():
        _not_updated(path, f"it is not in the run folder '{run_dir}'")
        return
    if (what := linked(path)) is not None:
        _not_updated(path, f"it is {what}: the row would change a file outside the run")
        return
    try:
        table = _rows(path)
    except (ValueError, OSError, csv.Error) as error:
        _not_updated(path, str(error))
        return
    if (
        len(table) < 2
        or any(len(row) != len(table[0]) for row in table[1:])
        or not all(_number(cell) for row in table[1:] for cell in row)
    ):
        _not_updated(path, "it is not a results table (a header, then rows of as many numbers)")
        return
    if rows is not None and len(table) - 1 != rows:
        _not_updated(
            path,
            f"it holds {len(table) - 1} rows where this test's row would be row {rows}: its "
            f"last row is not the one this test wrote",
        )
        return
    header = table[0] + [key for key in values if key not in table[0]]
    body = [row + [""] * (len(header) - len(row)) for row in table[1:]]
    for key, value in values.items():
        body[-1][header.index(key)] = f"{float(value):.4f}"
    buffer = io.StringIO(newline="")
    csv.writer(buffer, delimiter=",").writerows([header, *body])
    with replaced_atomically(path) as partial:
        partial.write_text(buffer.getvalue(), newline="")
