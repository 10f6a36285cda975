"""TorchUncertainty's own recipe format on the command line (:func:`tu_format_args`), and the
jsonargparse types the command reads (:func:`register_types`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import yaml

from ..safety.files import load_yaml, read_yaml
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
    (:func:`~torch_uncertainty_signorm.cli.tu_format.register_shorthands`).

    Called by :class:`~torch_uncertainty_signorm.cli.TUSigmaNormCLI` before it builds its parser;
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


def _is_file(value: str) -> bool:
    try:
        return Path(value).is_file()
    except (OSError, ValueError):  # a YAML string too long or odd for a path
        return False


def tu_format_args(args: Iterable[str]) -> list[str]:
    """Command-line ``args`` reading TorchUncertainty's recipes as its ``main.py`` does.

    * ``--data CIFAR10DataModule`` (a class name or an import path) names the datamodule of
      ``data:`` blocks without ``class_path``;
    * a ``routine:`` block without ``class_path`` is
      :data:`~torch_uncertainty_signorm.cli.tu_format.DEFAULT_ROUTINE`;
    * ``--config`` recipes (files, or YAML strings such as those
      :func:`~torch_uncertainty_signorm.cli.recipe_bases.expand_recipe_bases` passes) are
      updated by
      :func:`~torch_uncertainty_signorm.cli.tu_format.normalize_recipe` (a recipe it changes is
      passed on as a YAML string), and a datamodule no recipe nor ``--data`` names is an error
      (:func:`~torch_uncertainty_signorm.cli.tu_format.check_datamodule_named`).

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
        at = _option_value(args, index, "--config")
        if at is None:
            continue
        value = _value(args, at, "--config")
        # bounded: a cyclic alias or a "billion laughs" is refused on one line, never walked; a
        # value that is no file is a recipe given as a YAML string (as the bases' expansion
        # passes a recipe naming bases)
        recipe = read_yaml(value, "--config") if _is_file(value) else load_yaml(value, "--config")
        if not isinstance(recipe, dict):
            continue
        recipes.append(recipe)
        if (normalized := normalize_recipe(recipe)) != recipe:
            _set_value(args, at, "--config", yaml.safe_dump(normalized, sort_keys=False))
    check_datamodule_named(recipes, datamodule)
    start = next((i + 1 for i, arg in enumerate(args) if arg in SUBCOMMANDS), 0)
    defaults = [f"--routine={DEFAULT_ROUTINE}"] + ([f"--data={datamodule}"] if datamodule else [])
    return args[:start] + defaults + args[start:]
