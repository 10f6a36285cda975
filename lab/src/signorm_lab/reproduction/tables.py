"""Rows of text cells as a table: aligned plain text for the terminal, or Markdown for the docs.

Every command of :mod:`signorm_lab.reproduction` (and of the checkout's studies)
prints or writes its tables through :func:`format_table`; the cells arrive formatted (each
command knows its units and digits).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["format_table", "markdown_table"]


def format_table(
    header: Sequence[str],
    body: Sequence[Sequence[str]],
    *,
    markdown: bool = False,
    align: str | None = None,
) -> str:
    """``header`` and ``body`` as a table, one line per row, ending with a newline.

    Plain text pads every column to its widest cell, separates columns by two spaces and
    rules the header off with dashes; Markdown is a GitHub-flavoured pipe table.

    Args:
        header: Column titles.
        body: Rows of cells, each as long as ``header``.
        markdown: A Markdown table instead of aligned plain text.
        align: One ``l`` (left) or ``r`` (right) per column; default the first column left,
            the others (numbers) right.

    Raises:
        ValueError: If a row or ``align`` does not have one entry per column, or ``align``
            holds a letter other than ``l`` and ``r``.
    """
    align = align if align is not None else "l" + "r" * (len(header) - 1)
    if len(align) != len(header) or set(align) - {"l", "r"}:
        raise ValueError(f"align needs one 'l' or 'r' per column ({len(header)}), got {align!r}.")
    if ragged := [row for row in body if len(row) != len(header)]:
        raise ValueError(
            f"every row needs {len(header)} cells (one per column of {list(header)}), "
            f"got {list(ragged[0])!r}."
        )
    rows = [list(map(str, header)), *(list(map(str, row)) for row in body)]
    if markdown:
        rule = "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"
        lines = ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join([lines[0], rule, *lines[1:]]) + "\n"
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.rjust(w) if a == "r" else cell.ljust(w)
            for cell, w, a in zip(row, widths, align, strict=True)
        ).rstrip()
        for row in rows
    ]
    return "\n".join([lines[0], "-" * sum([*widths, 2 * (len(widths) - 1)]), *lines[1:]]) + "\n"


def markdown_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """``columns`` of ``rows`` as a Markdown table: floats to 4 significant digits, a missing
    value as an empty cell."""
    body = [
        [f"{row[c]:.4g}" if isinstance(row.get(c), float) else str(row.get(c, "")) for c in columns]
        for row in rows
    ]
    return format_table(columns, body, markdown=True)
