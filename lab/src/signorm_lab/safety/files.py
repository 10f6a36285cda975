"""Files the package writes and reads: the user's umask on files written through libraries
(:func:`follow_umask`), file names that stay in their folder (:func:`check_file_name`), and
inputs opened as regular files only (:func:`open_regular`, :func:`read_regular`), each read once
within :func:`read_once` (the bytes checked are the bytes parsed), and YAML read bounded, UTF-8
and without duplicate keys (:func:`load_yaml`, :func:`read_yaml`)."""

from __future__ import annotations

import contextlib
import contextvars
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "MAX_YAML_NODES",
    "UnboundedYAML",
    "check_file_name",
    "current_umask",
    "file_kind",
    "follow_umask",
    "load_yaml",
    "open_regular",
    "read_once",
    "read_regular",
    "read_yaml",
]


def current_umask() -> int:
    """The process's umask (read by setting it, then setting it back)."""
    mask = os.umask(0o022)  # the only way to read the umask is to set it
    os.umask(mask)
    return mask


def follow_umask(path: str | Path) -> Path:
    """Set ``path``'s mode to ``0o666`` less the umask, as ``open(path, "w")`` would.

    safetensors writes its files with mode ``0o600`` whatever the umask, so an exported model
    would not be readable by the group that reads its ``config.json``.
    """
    path = Path(path)
    os.chmod(path, 0o666 & ~current_umask())
    return path


def check_file_name(name: object, where: str, example: str = "results.csv") -> str:
    """``name`` if it is a plain file name (no folder, no ``..``, not absolute), so that
    ``folder / name`` stays inside ``folder``.

    Raises:
        ValueError: Naming ``where``, the value and what is valid.
    """
    if (
        not isinstance(name, str)
        or not name
        or name in (".", "..")
        or "\0" in name
        or os.sep in name
        or (os.altsep and os.altsep in name)
        or Path(name).name != name
    ):
        raise ValueError(
            f"{where}={name!r:.200} is not a plain file name: a run writes its files inside its "
            f"own folder only; give a name without folders, e.g. {example!r}."
        )
    return name


def file_kind(mode: int) -> str:
    """What a file of ``mode`` that is not a regular file is, in words ('a named pipe')."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular(path: str | Path, where: str, expected: str = "a regular file") -> BinaryIO:
    """``path`` opened for binary reading if it is a regular file, checked on the opened file
    (``O_NONBLOCK`` then ``fstat``): a pipe or device swapped in after an earlier check is
    refused, never read (reading it would block or never end).

    Raises:
        FileNotFoundError: If nothing is there.
        ValueError: Naming ``where``, the file, what it is and ``expected``.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        descriptor = os.open(path, flags)
    except FileNotFoundError:
        raise FileNotFoundError(f"{where}='{path}' does not exist.") from None
    except IsADirectoryError:
        raise ValueError(f"{where}='{path}' is a directory; expected {expected}.") from None
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(f"{where}='{path}' is {file_kind(mode)}; expected {expected}.")
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


#: The bytes of each file read within :func:`read_once`, by absolute path (``None``: outside).
_READ_ONCE: contextvars.ContextVar[dict[str, bytes] | None] = contextvars.ContextVar(
    "read_once", default=None
)


@contextlib.contextmanager
def read_once() -> Iterator[None]:
    """Within the block, each file :func:`read_regular` reads is read from disk once: a later read
    of the same path gets the bytes of the first, so a file replaced between a check and the
    parse that follows it is parsed as it was checked."""
    token = _READ_ONCE.set({} if _READ_ONCE.get() is None else _READ_ONCE.get())
    try:
        yield
    finally:
        _READ_ONCE.reset(token)


def read_regular(
    path: str | Path, where: str, limit: int | None = None, expected: str = "a regular file"
) -> bytes:
    """The bytes of the regular file ``path`` (:func:`open_regular`), at most ``limit``; within
    :func:`read_once`, the bytes of its first read.

    Raises:
        ValueError: As :func:`open_regular`, or if the file holds more than ``limit`` bytes.
    """
    cache, key = _READ_ONCE.get(), os.path.abspath(path)
    if cache is not None and key in cache:
        data = cache[key]
    else:
        with open_regular(path, where, expected) as file:
            data = file.read() if limit is None else file.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise ValueError(
            f"{where}='{path}' holds more than {limit} bytes; expected {expected} "
            f"(at most {limit} bytes)."
        )
    if cache is not None:
        cache[key] = data
    return data


#: YAML read from a file holds a few thousand nodes; aliases are counted at each use.
MAX_YAML_NODES = 100_000


class UnboundedYAML(ValueError):
    """A YAML document refused for its size once aliases are expanded, a cycle of aliases, or
    its nesting: reading it whole would not end, or not fit in memory."""


def _expanded_size(node: object, limit: int) -> int | None:
    """The number of nodes of a composed YAML ``node`` with every alias expanded, counted in
    time linear in the distinct nodes; stops past ``limit``. ``None`` when an alias names a
    node holding it (``a: &r [*r]``): the expansion never ends."""
    import yaml

    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # nodes whose children are being counted: a path from the root
    stack: list[tuple[object, bool]] = [(node, False)]
    while stack:
        current, children_done = stack.pop()
        if id(current) in sizes and not children_done:
            continue
        if isinstance(current, yaml.SequenceNode):
            children = current.value
        elif isinstance(current, yaml.MappingNode):
            children = [item for pair in current.value for item in pair]
        else:
            sizes[id(current)] = 1
            continue
        if not children_done:
            if id(current) in open_nodes:
                return None
            open_nodes.add(id(current))
            stack.append((current, True))
            for child in children:
                if id(child) in open_nodes:
                    return None
                if id(child) not in sizes:
                    stack.append((child, False))
            continue
        open_nodes.discard(id(current))
        total = 1 + sum(sizes.get(id(child), limit + 1) for child in children)
        sizes[id(current)] = min(total, limit + 1)
    return sizes[id(node)]


def _unique_keys_loader(text: str) -> object:
    """A ``yaml.SafeLoader`` of ``text`` refusing a key given twice in one mapping (PyYAML keeps
    the last, silently), ``<<`` included; a merge (``<<: *base``) may still override what it
    brings."""
    import yaml

    class UniqueKeysLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                seen: dict[object, int] = {}
                for key_node, _ in node.value:
                    if not isinstance(key_node, yaml.ScalarNode):
                        continue
                    line = key_node.start_mark.line + 1
                    if key_node.tag.endswith(":merge"):  # one merge a mapping: `<<` is a key
                        key = "<<"
                    else:
                        key = self.construct_object(key_node)
                    if key in seen:
                        raise DuplicateKey(key, seen[key], line)
                    seen[key] = line
            return super().construct_mapping(node, deep)

    return UniqueKeysLoader(text)


class DuplicateKey(ValueError):
    """A YAML mapping giving one key twice."""

    def __init__(self, key: object, first: int, again: int) -> None:
        super().__init__(key, first, again)
        self.key, self.first, self.again = key, first, again


def load_yaml(text: str | bytes, where: str, limit: int = MAX_YAML_NODES) -> object:
    """``yaml.safe_load(text)`` of UTF-8 text, refused when a mapping gives a key twice (YAML
    would keep the last one silently) or the document expands to more than ``limit`` nodes
    (nested aliases, a "billion laughs": each use of an alias counts its nodes again, as every
    walk of the loaded data meets them).

    Raises:
        UnboundedYAML: Naming ``where``, the size and the limit, or the cyclic alias (a
            ``ValueError``).
        ValueError: YAML's error, a byte that is not UTF-8 or a duplicate key, on one line.
    """
    import yaml

    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise ValueError(
                f"{where} is not UTF-8 text (byte 0x{text[error.start]:02x} at offset "
                f"{error.start}); save it as UTF-8."
            ) from None
    loader = _unique_keys_loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node, limit)
        if size is None:
            raise UnboundedYAML(
                f"{where} holds a cyclic YAML alias (an alias naming a node that holds it), "
                f"which expands for ever: refused; write the value out, or alias only nodes "
                f"that do not hold the alias."
            )
        if size > limit:
            raise UnboundedYAML(
                f"{where} expands to more than {limit} YAML nodes (its aliases nest copies of "
                f"copies); a recipe or run configuration holds a few thousand: refused."
            )
        return loader.construct_document(node)
    except yaml.YAMLError as error:
        raise ValueError(f"{where} is not valid YAML ({' '.join(str(error).split())}).") from None
    except DuplicateKey as error:
        raise ValueError(
            f"{where} gives the key {error.key!r:.80} twice (lines {error.first} and "
            f"{error.again}), and YAML would keep the last silently; keep one of them."
        ) from None
    except RecursionError:
        raise UnboundedYAML(f"{where} is nested too deeply to be read as YAML.") from None
    finally:
        loader.dispose()


def read_yaml(path: str | Path, where: str, limit_bytes: int = 16 << 20) -> object:
    """The YAML document of the regular file ``path`` (:func:`open_regular`, at most
    ``limit_bytes``, alias expansion bounded by :func:`load_yaml`)."""
    return load_yaml(read_regular(path, where, limit_bytes, "a YAML file"), f"{where}='{path}'")
