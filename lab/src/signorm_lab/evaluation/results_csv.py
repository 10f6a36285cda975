"""Extra columns in TorchUncertainty's ``results.csv``: the routine's and callbacks' values."""

from __future__ import annotations

import csv
import io
import warnings
from collections.abc import Mapping
from pathlib import Path

from torch import Tensor

from ..safety.atomic_files import replaced_atomically
from ..safety.files import read_regular

__all__ = ["append_to_last_row"]

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


def append_to_last_row(
    path: Path, values: Mapping[str, Tensor | float], run_dir: Path | None = None
) -> None:
    """Write ``values`` into the last row of the CSV at ``path`` (the row TorchUncertainty's
    ``csv_writer`` just wrote), as ``%.4f`` like its own; new keys become new columns.

    The file is replaced whole (a new file renamed over it), never edited in place, and only
    when it is a results table of the run: a regular file (not a link) inside ``run_dir`` whose
    rows all have the header's fields. Otherwise it is left as it is, with a warning naming it.
    Nothing happens when there is no such file.
    """
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return
    if run_dir is not None and path.parent.resolve() != Path(run_dir).resolve():
        _not_updated(path, f"it is not in the run folder '{run_dir}'")
        return
    if path.is_symlink():
        _not_updated(path, "it is a symbolic link, not the table the test wrote")
        return
    if path.lstat().st_nlink > 1:
        _not_updated(
            path,
            "it is a hard link (another name shares its data): the row would "
            "change a file outside the run",
        )
        return
    try:
        text = read_regular(path, "results", _MAX_RESULTS_BYTES, "a results CSV").decode()
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except (ValueError, OSError, csv.Error) as error:
        _not_updated(path, str(error))
        return
    if (
        len(rows) < 2
        or any(len(row) != len(rows[0]) for row in rows[1:])
        or not all(_number(cell) for row in rows[1:] for cell in row)
    ):
        _not_updated(path, "it is not a results table (a header, then rows of as many numbers)")
        return
    header = rows[0] + [key for key in values if key not in rows[0]]
    body = [row + [""] * (len(header) - len(row)) for row in rows[1:]]
    for key, value in values.items():
        body[-1][header.index(key)] = f"{float(value):.4f}"
    buffer = io.StringIO(newline="")
    csv.writer(buffer, delimiter=",").writerows([header, *body])
    with replaced_atomically(path) as partial:
        partial.write_text(buffer.getvalue(), newline="")
