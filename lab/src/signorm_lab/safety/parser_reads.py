"""Every file the recipe parser reads, checked as it reads it: the export command's recipe and
each file its values name, at any depth, resolved by the parser itself.

:func:`~signorm_lab.safety.allowlist.check_recipe` walks a recipe before parsing;
the parser (jsonargparse) then opens the files the recipe's strings name, from the folder of the
file naming them, expanding ``~``, reading ``file://`` paths. :func:`checked_parser_reads` makes
each such read go through this package instead: the file is opened as a regular file
(:func:`~signorm_lab.safety.files.open_regular`, so a pipe swapped in after the
check is refused, never waited on), its YAML read bounded, and the very text the parser gets is
checked (:func:`~signorm_lab.safety.allowlist.check_recipe`, from the file's own
folder) before the parser sees it. URLs, fsspec paths and standard input are refused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from . import allowlist
from .files import load_yaml, read_regular

__all__ = ["MAX_PARSED_FILE_BYTES", "checked_parser_reads"]

#: A file the parser reads for the export command: recipe-sized.
MAX_PARSED_FILE_BYTES = 1 << 20


@contextlib.contextmanager
def checked_parser_reads(allowed: frozenset[str]) -> Iterator[list[ValueError]]:
    """While the block runs, every file jsonargparse reads is read and checked here.

    Yields the refusals (``ValueError``, one line each) met while parsing: jsonargparse may
    report a failed read inside a longer error of its own, so the caller raises the first one
    after parsing (the parse fails either way: a refused file's text never reaches the parser).

    Args:
        allowed: The class paths the files may name
            (:data:`~signorm_lab.safety.allowlist.RECIPE_CLASS_PATHS` and more).
    """
    from jsonargparse import Path as ParserPath

    refusals: list[ValueError] = []
    original = ParserPath.read_text

    def read_text(self: ParserPath) -> str:
        try:
            return _checked_text(self, allowed)
        except ValueError as error:
            refusals.append(error)
            raise

    ParserPath.read_text = read_text  # type: ignore[method-assign]
    try:
        yield refusals
    finally:
        ParserPath.read_text = original  # type: ignore[method-assign]


def _checked_text(path: object, allowed: frozenset[str]) -> str:
    """The text of the file jsonargparse's ``path`` names, once checked."""
    shown = str(getattr(path, "relative", path))
    if getattr(path, "is_url", False) or getattr(path, "is_fsspec", False) or shown == "-":
        raise ValueError(
            f"{shown!r} names a URL, a remote path or standard input, which a "
            f"recipe given to the export command may not read; name a local "
            f"file, relative to the file naming it."
        )
    file = Path(str(getattr(path, "absolute", path)))
    data = read_regular(file, shown, MAX_PARSED_FILE_BYTES, "a YAML file (a recipe block)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"'{file}' is not UTF-8 text; expected a YAML file.") from None
    content = allowlist.current_class_paths(load_yaml(text, f"'{file}'"))
    allowlist.check_recipe(content, str(file), allowed, file.parent)
    return text
