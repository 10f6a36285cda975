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

:func:`parser_reads_once` makes the parser's reads of local files go through
:func:`~signorm_lab.safety.files.read_regular` too, so that within
:func:`~signorm_lab.safety.files.read_once` the parser gets the bytes an earlier check read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from . import allowlist
from .files import load_yaml, read_regular

__all__ = ["MAX_PARSED_FILE_BYTES", "checked_parser_reads", "parser_reads_once"]

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
    refusals: list[ValueError] = []

    def read_text(path: object, _original: object) -> str:
        try:
            return _checked_text(path, allowed)
        except ValueError as error:
            refusals.append(error)
            raise

    with _parser_read_text(read_text):
        yield refusals


@contextlib.contextmanager
def _parser_read_text(read_text: Callable[[object, Callable[..., str]], str]) -> Iterator[None]:
    """jsonargparse's ``Path.read_text`` replaced by ``read_text(path, original)`` while the
    block runs."""
    from jsonargparse import Path as ParserPath

    original = ParserPath.read_text

    def replacement(self: object) -> str:
        return read_text(self, original)

    replacement.reads_through_read_regular = True  # type: ignore[attr-defined]
    ParserPath.read_text = replacement  # type: ignore[method-assign]
    try:
        yield
    finally:
        ParserPath.read_text = original  # type: ignore[method-assign]


@contextlib.contextmanager
def parser_reads_once() -> Iterator[None]:
    """While the block runs, jsonargparse reads each local file through
    :func:`~signorm_lab.safety.files.read_regular` (a URL or standard input as it would):
    within :func:`~signorm_lab.safety.files.read_once`, the bytes read first, when the
    command's own reading of its recipes checked them."""

    def read_text(path: object, original: Callable[..., str]) -> str:
        if getattr(path, "is_url", False) or getattr(path, "is_fsspec", False):
            return original(path)
        if str(getattr(path, "relative", path)) == "-":
            return original(path)
        file = Path(str(getattr(path, "absolute", path)))
        shown = str(getattr(path, "relative", path))
        data = read_regular(file, shown, expected="a YAML file")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"'{file}' is not UTF-8 text; expected a YAML file.") from None

    from jsonargparse import Path as ParserPath

    if getattr(ParserPath.read_text, "reads_through_read_regular", False):
        yield  # within checked_parser_reads: its reads are checked, and go through read_regular
        return
    with _parser_read_text(read_text):
        yield


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
