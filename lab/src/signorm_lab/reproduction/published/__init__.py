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
The sidecar's ``budget`` gives the training budget (``max_epochs`` or ``max_steps``) of the
protocol behind the rows, see :meth:`PublishedTable.budget`. Key values can be named loosely
(``sigmaN-Ens``, ``WRN-28-10``): see :func:`same_key`.

Example:
    >>> from signorm_lab.reproduction.published import load_table
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
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

__all__ = ["TABLES", "PublishedTable", "load_table", "same_key"]

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


#: Spellings of key values that :func:`same_key` accepts for the tables': whole-word
#: abbreviations, after ``sigma`` -> ``σ``, lower case and without spaces, ``-`` and ``_``.
_ABBREVIATIONS = (
    (re.compile(r"^wrn"), "wideresnet"),
    (re.compile(r"^rn(?=\d)"), "resnet"),
    (re.compile(r"^c(10|100)$"), r"cifar\1"),
    (re.compile(r"^(in|imagenet)(1k)?$"), "imagenet1k"),
)


def _canonical(value: Any) -> str:
    text = re.sub(r"[\s_\-]", "", str(value).lower().replace("sigma", "σ"))
    for pattern, full in _ABBREVIATIONS:
        text = pattern.sub(full, text)
    return text


def same_key(given: Any, value: Any) -> bool:
    """Whether ``given`` names the key value ``value`` of a table: exactly, or up to case,
    spaces, ``-`` and ``_``, ASCII ``sigma`` for ``σ`` and the abbreviations ``WRN``
    (WideResNet), ``RN`` (ResNet), ``C10``/``C100`` (CIFAR-10/100) and ``ImageNet``/``IN``
    (ImageNet-1k): ``sigmaN-Ens`` is ``σN-Ens``, ``WRN-28-10`` is ``WideResNet-28-10``."""
    return str(given) == str(value) or _canonical(given) == _canonical(value)


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
        return [
            c
            for c in self.columns
            if c not in self.key_columns
            and c in self.rows[0]
            and isinstance(self.rows[0][c], float)
        ]

    def select(self, **keys: Any) -> list[dict[str, Any]]:
        """The rows whose key columns match ``keys`` (compared as text, see :meth:`resolve`)."""
        return [self.rows[i] for i in self._indices(keys)]

    def select_text(self, **keys: Any) -> list[dict[str, str]]:
        """Like :meth:`select`, with the cells as printed in the paper."""
        return [self.text_rows[i] for i in self._indices(keys)]

    def resolve(self, **keys: Any) -> dict[str, str]:
        """``keys`` with each value spelled as in the table: a value matching one of its
        column's values under :func:`same_key` (``sigmaN-Ens``, ``WRN-28-10``) becomes that
        value; others are kept as given (and match no row).

        Raises:
            ValueError: If a key is not a column, listing the columns.
        """
        unknown = sorted(set(keys) - set(self.columns))
        if unknown:
            raise ValueError(
                f"{unknown} are not columns of table {self.name!r}; columns: {self.columns}."
            )
        resolved = {}
        for key, given in keys.items():
            values = list(dict.fromkeys(row[key] for row in self.text_rows))
            exact = [v for v in values if v == str(given)]
            close = exact or [v for v in values if same_key(given, v)]
            resolved[key] = close[0] if len(close) == 1 else str(given)
        return resolved

    def valid_values(self, **keys: Any) -> dict[str, list[str]]:
        """For each key column, the values of the rows matching the other ``keys`` (all rows'
        values where those match none): what a ``--where`` can name."""
        keys = self.resolve(**keys)
        choices = {}
        for column in self.key_columns:
            others = {k: v for k, v in keys.items() if k != column}
            rows = [self.text_rows[i] for i in self._indices(others)] or self.text_rows
            choices[column] = sorted({row[column] for row in rows})
        return choices

    def no_match_message(self, **keys: Any) -> str:
        """Why ``keys`` select no row (or several), with the valid values of each key."""
        found = len(self._indices(self.resolve(**keys)))
        valid = "; ".join(
            f"{column}: {', '.join(values)}" for column, values in self.valid_values(**keys).items()
        )
        return (
            f"{found} rows of table {self.name!r} match {keys}; valid values: {valid} "
            f"(case, spaces and '-' do not matter; 'sigma' stands for 'σ', WRN for "
            f"WideResNet, RN for ResNet, C10/C100 for CIFAR-10/100, IN for ImageNet-1k)."
        )

    def _indices(self, keys: dict[str, Any]) -> list[int]:
        keys = self.resolve(**keys)
        return [
            i for i, row in enumerate(self.text_rows) if all(row[k] == v for k, v in keys.items())
        ]

    def errata(self, row: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The sidecar's errata of ``row`` (a row of this table), by column.

        Each value holds ``published`` (as printed), ``corrected`` and ``reason``.
        """
        keys = {k: str(row[k]) for k in self.key_columns}
        return {
            e["column"]: e
            for e in self.meta.get("errata", [])
            if {k: str(v) for k, v in e["row"].items()} == keys
        }

    def budget(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """The training budget of the protocol behind ``row`` (a row of this table), from the
        sidecar's ``budget`` list (first entry whose ``row`` keys match): ``max_epochs`` or
        ``max_steps``, and its ``source``; ``None`` when the paper states none."""
        for entry in self.meta.get("budget", []):
            if all(same_key(v, row[k]) for k, v in entry["row"].items()):
                return {k: v for k, v in entry.items() if k != "row"}
        return None

    def row(self, **keys: Any) -> dict[str, Any]:
        """The single row matching ``keys``.

        Raises:
            ValueError: If no row or several rows match, listing the valid values of each key.
        """
        found = self.select(**keys)
        if len(found) != 1:
            raise ValueError(self.no_match_message(**keys))
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
