"""Extra columns in TorchUncertainty's ``results.csv``: the routine's and callbacks' values."""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path

from torch import Tensor

__all__ = ["append_to_last_row"]


def append_to_last_row(path: Path, values: Mapping[str, Tensor | float]) -> None:
    """Write ``values`` into the last row of the CSV at ``path`` (the row TorchUncertainty's
    ``csv_writer`` just wrote), as ``%.4f`` like its own; new keys become new columns."""
    with path.open(newline="") as file:
        rows = list(csv.reader(file))
    header = rows[0] + [key for key in values if key not in rows[0]]
    body = [row + [""] * (len(header) - len(row)) for row in rows[1:]]
    for key, value in values.items():
        body[-1][header.index(key)] = f"{float(value):.4f}"
    with path.open("w", newline="") as file:
        csv.writer(file, delimiter=",").writerows([header, *body])
