"""Building a ``class_path``/``init_args`` block read from a file: the one builder.

Checkpoints' hyper-parameters and exports' ``config.json`` hold such blocks; both are built by
:func:`build_class_block`. Every class path, nested blocks and dotted strings included, is
checked against an allow-list before anything is imported
(:func:`~signorm_lab.safety.allowlist.check_class_paths`); then jsonargparse, the
parser of the ``torch-uncertainty`` command, checks and coerces every argument against its
class's signature (``"4"`` → ``4`` for an ``int``, a ``Literal``'s choices, lists and mappings
of these, nested blocks), and what it parsed is checked again before it is built.

Why jsonargparse rather than a checker of our own: it is how a recipe's block is read, so a
block from a file is typed exactly as the same block in a recipe, and there is no second set
of coercion rules to keep in step with it. It imports every class path it meets, hence the
allow-list first. One addition: an enum argument may be given by its value (``style:
"cifar"``), as exports write it (jsonargparse reads names only, ``CIFAR``).
"""

from __future__ import annotations

import enum
import inspect
import re
import typing
from argparse import ArgumentError
from collections.abc import Collection, Mapping
from typing import Any

import yaml
from jsonargparse import ArgumentParser

from .allowlist import (
    ALLOWED_CLASS_PATHS,
    ARGUMENT_CLASS_PATHS,
    check_class_paths,
    check_class_strings,
    check_parsed,
    current_class_paths,
    import_object,
    parameter_type,
    value_at,
)

__all__ = ["build_class_block"]


def build_class_block(
    block: Mapping, base: type, allowed: Collection[str] = ALLOWED_CLASS_PATHS, where: str = "model"
) -> Any:
    """Build ``block`` (a ``class_path``/``init_args`` mapping read from a file), checked.

    Args:
        block: The block; a moved class path in it is read as its current one
            (:func:`~signorm_lab.safety.allowlist.current_class_paths`).
        base: The type it must build (its ``class_path`` may name a function returning one).
        allowed: The class paths it may name, at any depth.
        where: Its place, in error messages (``model``).

    Returns:
        The built object.

    Raises:
        ValueError: Naming the place, the value and what is valid: a class path outside
            ``allowed`` (nothing imported), or an argument its class does not take or of
            another type.
    """
    allowed = frozenset(allowed)
    block = current_class_paths(block)
    check_class_paths(block, allowed, where)  # before anything is imported
    block = _enums_by_name(block, allowed)
    check_class_strings(block, base, where, allowed)
    parser = ArgumentParser(exit_on_error=False)
    parser.add_argument("--block", type=base, required=True)
    try:
        config = parser.parse_object({"block": dict(block)})
    except ArgumentError as error:
        raise _refusal(error, block, where) from None
    parsed = yaml.safe_load(parser.dump(config, skip_none=False))["block"]
    # the parser writes out the signatures' defaults too (``activation_fn: ...relu``)
    check_parsed(block, parsed, where, allowed | ARGUMENT_CLASS_PATHS)
    return parser.instantiate_classes(config)["block"]


def _enums_by_name(node: Any, allowed: frozenset[str]) -> Any:
    """``node`` with every enum argument given by value (``"cifar"``) given by name
    (``"CIFAR"``), which jsonargparse reads; classes are imported from ``allowed`` only."""
    if isinstance(node, Mapping) and isinstance(node.get("class_path"), str):
        owner = import_object(node["class_path"], allowed)
        init_args = {}
        for key, value in (node.get("init_args") or {}).items():
            kind = _enum_type(parameter_type(owner, key))
            if kind is not None and isinstance(value, str) and value not in kind.__members__:
                init_args[key] = next((m.name for m in kind if m.value == value), value)
            else:
                init_args[key] = _enums_by_name(value, allowed)
        return {**node, "init_args": init_args}
    if isinstance(node, Mapping):
        return {key: _enums_by_name(value, allowed) for key, value in node.items()}
    if isinstance(node, list):
        return [_enums_by_name(value, allowed) for value in node]
    return node


def _enum_type(annotation: Any) -> type[enum.Enum] | None:
    """The enum ``annotation`` takes (alone or beside ``None``), else ``None``."""
    options = typing.get_args(annotation) if typing.get_args(annotation) else (annotation,)
    kinds = [kind for kind in options if isinstance(kind, type) and issubclass(kind, enum.Enum)]
    return kinds[0] if len(kinds) == 1 else None


def _refusal(error: ArgumentError, block: Mapping, where: str) -> ValueError:
    """jsonargparse's nested message on one line: the dotted place, the value, what is valid."""
    message = str(error)
    keys = re.findall(r'Parser key "([^"]+)"', message)[1:]  # [0] is "block"
    place = ".".join([where, *(f"init_args.{key}" for key in keys)])
    value = value_at(block, place, where)
    unknown = re.search(r"Option '([^']+)' is not accepted", message)
    if unknown and isinstance(value, Mapping) and "class_path" in value:
        key, class_path = unknown.group(1), value["class_path"]
        parameters = inspect.signature(import_object(class_path)).parameters.values()
        names = [p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        return ValueError(
            f"{place}.init_args.{key}={(value.get('init_args') or {}).get(key)!r:.200} is not an "
            f"argument of {class_path}; valid arguments: {', '.join(names)}."
        )
    reasons = [
        line.strip()
        for line in message.splitlines()
        if line.strip()
        and not re.match(r"(Parser key|Problem with given class_path)", line.strip())
    ]
    return ValueError(
        f"{place}={value!r:.200} is refused: {' '.join(reasons) or message}; give a value of "
        f"the type its class's signature names."
    )
