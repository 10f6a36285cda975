"""A comparison file (``experiments/compare/*.yaml``), read and checked: one recipe per method,
the reference method, the seeds and the options every run takes."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..safety.files import read_yaml

__all__ = ["RESERVED_OPTIONS", "Comparison", "check_options", "check_seeds", "read_comparison"]

#: Options the comparison sets on every run itself: given again, one of them would be dropped.
RESERVED_OPTIONS = ("--seed_everything", "--trainer.logger", "--ckpt_path")
_METHOD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
#: Unicode categories a label cannot hold: control and format characters (a newline, a
#: terminal escape, a bidirectional override) and line or paragraph separators.
_UNPRINTABLE = ("Cc", "Cf", "Zl", "Zp")


@dataclass(frozen=True)
class Comparison:
    """A comparison file, checked: recipes per method, seeds, the reference method, options."""

    path: Path
    methods: Mapping[str, Mapping[str, Any]]
    reference: str
    seeds: tuple[int, ...]
    args: tuple[str, ...] = ()
    see: str = ""  # where a difference was found, said when the members stay one model


def _fail(where: str, message: str) -> ValueError:
    return ValueError(f"{where}: {message}")


def check_options(value: Any, where: str) -> tuple[str, ...]:
    """``value`` as options for every run: a list of strings, none the comparison sets itself."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(where, f"expected a list of strings, got {value!r}.")
    if reserved := [v for v in value if v.startswith(RESERVED_OPTIONS)]:
        raise _fail(
            where,
            f"{reserved[0]!r} is set by signorm-compare for every run (the seed "
            f"from --seeds, the logger under --out, the resume checkpoint); "
            f"options starting with {', '.join(RESERVED_OPTIONS)} are refused.",
        )
    return tuple(value)


def check_seeds(value: Any, where: str) -> tuple[int, ...]:
    if (
        not isinstance(value, list)
        or not value
        or not all(type(v) is int and v >= 0 for v in value)
        or len(set(value)) < len(value)
    ):
        raise _fail(where, f"expected a non-empty list of distinct integers >= 0, got {value!r}.")
    return tuple(value)


def read_comparison(path: str | Path) -> Comparison:
    """Read and check a comparison file; recipe paths are relative to the file.

    Raises:
        ValueError: Naming the key and the value that is wrong, and what would be valid.
    """
    path = Path(path)
    tree = read_yaml(path, "--config")
    if not isinstance(tree, Mapping):
        raise _fail(
            str(path),
            f"expected a mapping with 'methods', 'reference' and 'seeds', "
            f"got {type(tree).__name__}.",
        )
    if unknown := set(tree) - {"methods", "reference", "seeds", "args", "description", "see"}:
        raise _fail(
            str(path),
            f"unknown key(s) {sorted(unknown)}; valid: methods, reference, "
            "seeds, args, description, see.",
        )
    methods = tree.get("methods")
    if not isinstance(methods, Mapping) or len(methods) < 2:
        raise _fail(
            f"{path}: methods",
            f"expected a mapping of at least two methods (name: recipe), got {methods!r}.",
        )
    checked: dict[str, dict[str, Any]] = {}
    for name, given in methods.items():
        where = f"{path}: methods.{name}"
        if not isinstance(name, str) or not _METHOD_NAME.fullmatch(name):
            raise _fail(where, "a method name is letters, digits, '_', '.' or '-'.")
        spec = {"recipe": given} if isinstance(given, str) else given
        if not isinstance(spec, Mapping) or not isinstance(spec.get("recipe"), str):
            raise _fail(
                where,
                f"expected a recipe path or {{recipe: PATH, label: TEXT, args: "
                f"[...]}}, got {spec!r}.",
            )
        if unknown := set(spec) - {"recipe", "label", "args"}:
            raise _fail(where, f"unknown key(s) {sorted(unknown)}; valid: recipe, label, args.")
        recipe = (path.parent / spec["recipe"]).resolve()
        if not recipe.is_file():
            raise _fail(
                where, f"recipe '{spec['recipe']}' is not a file (read relative to {path.parent})."
            )
        label = str(spec.get("label", name))
        if bad := [c for c in label if unicodedata.category(c) in _UNPRINTABLE]:
            raise _fail(
                f"{where}.label",
                f"{label!r} holds the control character {bad[0]!r} (a line break or a terminal "
                "escape would forge lines in comparison.txt); write the label on one line of "
                "printable characters.",
            )
        checked[name] = {
            "recipe": recipe,
            "label": label,
            "args": check_options(spec.get("args", []), f"{where}.args"),
        }
    reference = tree.get("reference")
    if reference not in checked:
        raise _fail(
            f"{path}: reference", f"{reference!r} is not one of the methods {list(checked)}."
        )
    return Comparison(
        path,
        checked,
        reference,
        check_seeds(tree.get("seeds"), f"{path}: seeds"),
        check_options(tree.get("args", []), f"{path}: args"),
        str(tree.get("see", "")),
    )
