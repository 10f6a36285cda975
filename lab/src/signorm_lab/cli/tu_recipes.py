"""TorchUncertainty's own recipe format on the command line (:func:`tu_format_args`), and the
jsonargparse types the command reads (:func:`register_types`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import yaml

from ..safety.allowlist import current_argument
from ..safety.files import UnboundedYAML, load_yaml, read_yaml
from .recipe_bases import CONFIG_OPTIONS, anchored, names_a_file
from .tu_format import (
    DEFAULT_ROUTINE,
    check_datamodule_named,
    normalize_recipe,
    register_shorthands,
    resolve_datamodule,
)

__all__ = ["SUBCOMMANDS", "register_types", "tu_format_args"]

#: Lightning's subcommands.
SUBCOMMANDS = ("fit", "validate", "test", "predict")


def register_types() -> None:
    """Register the jsonargparse types the command's recipes use: TorchUncertainty's
    ``style: cifar`` shorthand
    (:func:`~signorm_lab.cli.tu_format.register_shorthands`).

    Called by :class:`~signorm_lab.cli.TUSigmaNormCLI` before it builds its parser;
    idempotent.
    """
    register_shorthands()


def _option_value(args: list[str], index: int, option: str) -> int | None:
    """The index of ``option``'s value when ``args[index]`` is ``option`` or ``option=...``."""
    if args[index] == option and index + 1 < len(args):
        return index + 1
    return index if args[index].startswith(f"{option}=") else None


def _set_value(args: list[str], index: int, option: str, value: str) -> None:
    args[index] = f"{option}={value}" if args[index].startswith(f"{option}=") else value


def _value(args: list[str], index: int, option: str) -> str:
    return args[index].removeprefix(f"{option}=")


def tu_format_args(args: Iterable[str]) -> list[str]:
    """Command-line ``args`` reading TorchUncertainty's recipes as its ``main.py`` does.

    * ``--data CIFAR10DataModule`` (a class name or an import path) names the datamodule of
      ``data:`` blocks without ``class_path``;
    * a ``routine:`` block without ``class_path`` is
      :data:`~signorm_lab.cli.tu_format.DEFAULT_ROUTINE`;
    * ``--config`` (or ``-c``) recipes (files, or YAML strings such as those
      :func:`~signorm_lab.cli.recipe_bases.expand_recipe_bases` passes) are
      updated by :func:`~signorm_lab.cli.tu_format.normalize_recipe` (a file it
      changes is passed on as a YAML string, its nested files anchored to its folder by
      :func:`~signorm_lab.cli.recipe_bases.anchored`), and a datamodule no recipe
      nor ``--data`` names is an error
      (:func:`~signorm_lab.cli.tu_format.check_datamodule_named`);
    * an option whose whole value is a moved class path (``--model.class_path=OLD``) gets the
      current one (:data:`~signorm_lab.safety.allowlist.MOVED_CLASS_PATHS`).

    Both classes are given as the first options of the subcommand, so a recipe's or a later
    option's ``class_path`` still overrides them.
    """
    args = list(args)
    datamodule = None
    for index in range(len(args)):
        at = _option_value(args, index, "--data")
        value = None if at is None else _value(args, at, "--data")
        if value and re.fullmatch(r"[A-Za-z_][\w.]*", value) and not Path(value).is_file():
            datamodule = resolve_datamodule(value)
            _set_value(args, at, "--data", datamodule)
    recipes = []
    for index in range(len(args)):
        option = next(
            (o for o in CONFIG_OPTIONS if _option_value(args, index, o) is not None), None
        )
        if option is None:
            continue
        at = _option_value(args, index, option)
        value = _value(args, at, option)
        # bounded: a cyclic alias or a "billion laughs" is refused on one line, never walked; a
        # value that is no file is a recipe given as a YAML string (as the bases' expansion
        # passes a recipe naming bases), or a mistake the parser names
        if names_a_file(value):
            recipe, folder = read_yaml(value, option), Path(value).parent
        else:
            try:
                recipe, folder = load_yaml(value, option), None
            except UnboundedYAML:
                raise
            except ValueError:
                continue
        if not isinstance(recipe, dict):
            continue
        recipes.append(recipe)
        if (normalized := normalize_recipe(recipe)) != recipe:
            if folder is not None:
                normalized = anchored(normalized, folder)
            _set_value(args, at, option, yaml.safe_dump(normalized, sort_keys=False))
    # A moved class path given on the command line (``--model.class_path=OLD``) too.
    args = [current_argument(arg) for arg in args]
    check_datamodule_named(recipes, datamodule)
    start = next((i + 1 for i, arg in enumerate(args) if arg in SUBCOMMANDS), 0)
    defaults = [f"--routine={DEFAULT_ROUTINE}"] + ([f"--data={datamodule}"] if datamodule else [])
    return args[:start] + defaults + args[start:]
