"""The paper's published tables as data: one CSV per table and a JSON sidecar naming its source.

Each table ``<name>.csv`` has a sidecar ``<name>.json`` with the LaTeX ``label`` and
``caption`` of the table it transcribes, the paper ``section`` it belongs to, the
``key_columns`` that identify a row, the ``units`` of each metric column (values are kept
exactly as printed, so percentages stay percentages), the experiment ``settings`` the numbers
come from, and ``notes`` on the transcription. Columns ending in ``_std`` hold the
seed standard deviation of the column they extend; an empty cell is a value the paper
does not report (e.g. Packed-Ensembles at ``M = 12``). Known misprints stay in the CSV as
printed and are listed in the sidecar's ``errata``: the ``row`` keys, the ``column``, the
``published`` value, the ``corrected`` one and the ``reason``; see :meth:`PublishedTable.errata`.

Example:
    >>> from torch_uncertainty_signorm.paper.published import load_table
    >>> table = load_table("main")
    >>> table.label
    'tab:main'
    >>> table.row(dataset="CIFAR-100", arch="WideResNet-28-10", method="σN-Ens")["NLL"]
    0.584
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from importlib import resources
from typing import Any

__all__ = ["TABLES", "PublishedTable", "load_table"]

#: Table name -> LaTeX label of the paper's table.
TABLES = {
    "main": "tab:main",
    "rn18": "tab:rn18",
    "sst2": "tab:sst2",
    "vit": "tab:vit",
    "mscaling": "tab:mscaling",
    "lambda": "tab:lambda",
    "fourmetric": "tab:fourmetric",
    "shift_cnn": "tab:shift-cnn",
    "shift_vit": "tab:shift-vit",
}


@dataclass(frozen=True)
class PublishedTable:
    """One published table: its rows (numbers as floats, NaN where not reported) and sidecar."""

    name: str
    columns: list[str]
    rows: list[dict[str, Any]]
    meta: dict[str, Any]
    #: The rows as printed in the paper (text cells, ``""`` where not reported).
    text_rows: list[dict[str, str]]

    @property
    def label(self) -> str:
        return self.meta["label"]

    @property
    def key_columns(self) -> list[str]:
        return list(self.meta["key_columns"])

    @property
    def metric_columns(self) -> list[str]:
        """The numeric columns that are not keys."""
        return [c for c in self.columns if c not in self.key_columns and c in self.rows[0]
                and isinstance(self.rows[0][c], float)]

    def select(self, **keys: Any) -> list[dict[str, Any]]:
        """The rows whose key columns equal ``keys`` (compared as text)."""
        return [self.rows[i] for i in self._indices(keys)]

    def select_text(self, **keys: Any) -> list[dict[str, str]]:
        """Like :meth:`select`, with the cells as printed in the paper."""
        return [self.text_rows[i] for i in self._indices(keys)]

    def _indices(self, keys: dict[str, Any]) -> list[int]:
        unknown = sorted(set(keys) - set(self.columns))
        if unknown:
            raise ValueError(f"{unknown} are not columns of table {self.name!r}; "
                             f"columns: {self.columns}.")
        return [i for i, row in enumerate(self.text_rows)
                if all(row[k] == str(v) for k, v in keys.items())]

    def errata(self, row: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The sidecar's errata of ``row`` (a row of this table), by column.

        Each value holds ``published`` (as printed), ``corrected`` and ``reason``.
        """
        keys = {k: str(row[k]) for k in self.key_columns}
        return {e["column"]: e for e in self.meta.get("errata", [])
                if {k: str(v) for k, v in e["row"].items()} == keys}

    def row(self, **keys: Any) -> dict[str, Any]:
        """The single row matching ``keys``.

        Raises:
            ValueError: If no row or several rows match, listing the valid values.
        """
        found = self.select(**keys)
        if len(found) != 1:
            choices = {k: sorted({str(r[k]) for r in self.rows}) for k in self.key_columns}
            raise ValueError(f"{len(found)} rows of table {self.name!r} match {keys}; "
                             f"key values: {choices}.")
        return found[0]


def _value(text: str, column: str, keys: list[str]) -> Any:
    if column in keys:
        return text
    if text == "":
        return math.nan
    try:
        return float(text)
    except ValueError:
        return text


def load_table(name: str) -> PublishedTable:
    """Load a published table by name (see :data:`TABLES`).

    Raises:
        ValueError: If ``name`` is not one of :data:`TABLES`.
    """
    if name not in TABLES:
        raise ValueError(f"unknown published table {name!r}; available: {sorted(TABLES)}.")
    folder = resources.files(__name__)
    meta = json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))
    with (folder / f"{name}.csv").open(encoding="utf-8", newline="") as file:
        reader = csv.DictReader(file)
        keys = meta["key_columns"]
        text_rows = list(reader)
        columns = list(reader.fieldnames or [])
    rows = [{c: _value(v, c, keys) for c, v in row.items()} for row in text_rows]
    return PublishedTable(name, columns, rows, meta, text_rows)
