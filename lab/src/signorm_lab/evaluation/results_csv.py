"""Extra columns in TorchUncertainty's ``results.csv``: the values the lab's callbacks add, and
each test's row added to the file whole, with a check saying a test wrote it."""

from __future__ import annotations

import csv
import io
import os
import stat
import warnings
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..safety.atomic_files import replaced_atomically
from ..safety.files import read_regular

if TYPE_CHECKING:
    from torch import Tensor

__all__ = [
    "ROW_CHECK_COLUMN",
    "add_test_row",
    "append_to_last_row",
    "check_test_rows",
    "linked",
    "row_check",
]

#: The column saying that a test wrote its row: a CRC-32 of the row's number and its named
#: values (:func:`row_check`), written with the row. A row added or edited by hand lacks it or
#: holds one that no longer matches; it is no proof against forgery, only against mistakes.
ROW_CHECK_COLUMN = "test/row_crc32"

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
    data = read_regular(path, "results", _MAX_RESULTS_BYTES, "a results CSV")
    try:
        return list(csv.reader(io.StringIO(data.decode(), newline="")))
    except (UnicodeDecodeError, csv.Error) as error:
        reason = " ".join(str(error).split())
        raise ValueError(
            f"{path} is not a results CSV ({reason}); a test writes UTF-8 numbers"
        ) from None


def row_check(number: int, header: list[str], row: list[str]) -> str:
    """The :data:`ROW_CHECK_COLUMN` value of the ``number``-th row (from 1) below ``header``: a
    CRC-32 of that number and of every non-empty ``name=value`` of the row, in the header's
    order (columns added by a later test, empty in this row, leave it as it was)."""
    named = (f"{n}={c}" for n, c in zip(header, row, strict=False) if c and n != ROW_CHECK_COLUMN)
    return str(zlib.crc32("\n".join([str(number), *named]).encode()))


def _checked(header: list[str], row: list[str], number: int) -> bool:
    """Whether ``row`` holds the check of the ``number``-th row a test wrote."""
    if ROW_CHECK_COLUMN not in header:
        return False
    return row[header.index(ROW_CHECK_COLUMN)] == row_check(number, header, row)


def _stamp(header: list[str], row: list[str], number: int) -> None:
    row[header.index(ROW_CHECK_COLUMN)] = row_check(number, header, row)


def check_test_rows(path: str | Path) -> None:
    """Refuse a run's ``results.csv`` that is a symbolic link (another run's results would
    pass for this one's), or that holds a row no test wrote: with
    :data:`ROW_CHECK_COLUMN`, a row whose check is missing or does not match its values (added
    or edited by hand); without it (a file of TorchUncertainty alone, or written before the
    check), more than one row (the rows cannot be told apart from rows appended by hand).

    Raises:
        ValueError: Naming the file and the row, and what to do.
    """
    path = Path(path)
    if path.is_symlink():
        raise ValueError(
            f"{path} is a symbolic link: a run's results.csv is the one its tests wrote in its "
            f"folder; copy the file there if it is this run's."
        )
    table = _rows(path)
    header, body = (table[0], table[1:]) if table else ([], [])
    if ROW_CHECK_COLUMN not in header:
        if len(body) > 1:
            raise ValueError(
                f"{path}: holds {len(body)} result rows and no {ROW_CHECK_COLUMN} column, so "
                f"the rows a test wrote cannot be told from rows appended by hand; keep only "
                f"the row of the run's last test (or test the run again into a new folder)."
            )
        return
    for number, row in enumerate(body, start=1):
        if len(row) != len(header) or not _checked(header, row, number):
            raise ValueError(
                f"{path}: row {number} was not written by a test (its {ROW_CHECK_COLUMN} is "
                f"missing or does not match its values and its place: a row added, edited or "
                f"removed by hand); restore the rows as the tests wrote them, or test the run "
                f"again into a new folder and check that one."
            )


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
    checked = _checked(table[0], table[-1], len(table) - 1)
    header = table[0] + [key for key in values if key not in table[0]]
    body = [row + [""] * (len(header) - len(row)) for row in table[1:]]
    for key, value in values.items():
        body[-1][header.index(key)] = f"{float(value):.4f}"
    if checked:  # a row a test wrote stays one; any other keeps its missing or wrong check
        _stamp(header, body[-1], len(body))
    _write(path, [header, *body])


def _write(path: Path, table: list[list[str]]) -> None:
    buffer = io.StringIO(newline="")
    csv.writer(buffer, delimiter=",").writerows(table)
    with replaced_atomically(path) as partial:
        partial.write_text(buffer.getvalue(), newline="")


def add_test_row(path: Path, written: Path, values: Mapping[str, Tensor | float]) -> None:
    """Add the row TorchUncertainty's ``csv_writer`` wrote into the new file ``written`` (its
    header and one row), completed with ``values`` and :data:`ROW_CHECK_COLUMN`, to the results
    CSV at ``path``: the whole file is written anew (the header the union of both, every row
    as long as it, empty cells where a row has no value) and renamed over ``path``, so that a
    reader never sees a row shorter than the header. ``written`` is removed after. The one row
    of a file written before the check gets its check too (:func:`check_test_rows` accepts such
    a file); several such rows do not, and stay refused.

    A ``path`` that is not a results table (see :func:`append_to_last_row`) is left as it is,
    with a warning naming it, and ``written`` is removed: the test's results are in its logs.
    """
    try:
        new = _rows(written)
        table = _rows(path) if os.path.lexists(path) else []
        if len(new) != 2:
            raise ValueError(f"{written} holds {len(new) - 1} rows where a test writes one")
        if table and (
            any(len(row) != len(table[0]) for row in table[1:])
            or not all(_number(cell) for row in table[1:] for cell in row)
        ):
            raise ValueError("it is not a results table (a header, then rows of as many numbers)")
    except (ValueError, OSError, csv.Error) as error:
        _not_updated(path, " ".join(str(error).split()))
        written.unlink(missing_ok=True)
        return
    row = dict(zip(new[0], new[1], strict=True)) | {
        key: f"{float(value):.4f}" for key, value in values.items()
    }
    old_header = table[0] if table else []
    header = [*old_header, *(key for key in row if key not in old_header)]
    if ROW_CHECK_COLUMN not in header:
        header.append(ROW_CHECK_COLUMN)
    body = [old + [""] * (len(header) - len(old)) for old in table[1:]]
    if ROW_CHECK_COLUMN not in old_header and len(body) == 1:
        _stamp(header, body[0], 1)  # a file of one row, written before the check: as accepted
    body.append([row.get(key, "") for key in header])
    _stamp(header, body[-1], len(body))
    _write(path, [header, *body])
    written.unlink(missing_ok=True)
