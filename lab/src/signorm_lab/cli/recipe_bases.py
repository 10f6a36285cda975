"""Recipes composed of base files: a top-level ``base:`` key naming the files a recipe extends.

Recipes of one family share their trainer, logger and callback blocks; those live in a few base
files (``experiments/base/``) and a recipe names them::

    base: [base/cnn_cifar.yaml]   # relative to this file
    trainer:
      max_epochs: 200
      logger:
        init_args: {save_dir: logs/wrn_c100, name: signorm}
    routine: ...

The user still types one ``--config``: :func:`expand_recipe_bases` rewrites the command line
before parsing into ``--config <base> ... --config <recipe without base:>``, so jsonargparse
merges the files itself, later ones overriding earlier ones: mappings are merged key by key (a
``class_path`` block given only ``init_args`` keeps the earlier ``class_path``), any other value
(lists included) is replaced, and a list key written ``callbacks+:`` is appended to the earlier
list (jsonargparse's list-append syntax). ``--print_config`` prints the merged configuration,
which is also what a run saves as its ``config.yaml``: a self-contained recipe.

Rules: ``base:`` is a path or a list of paths, each relative to the file naming it; a base may
name bases of its own (applied before it); every base must be a ``.yaml``/``.yml`` file inside
the folder of the recipe given on the command line (or one below it), so that copying a recipe
elsewhere fails naming the missing base instead of reading an unrelated file. Base files are read
by the same parser as recipes, so they are checked exactly as recipes are (and the export
command's allow-list checks every file of the chain, see :func:`recipe_chain`).

:func:`composed_recipe` gives the merged recipe as a plain dict without parsing (for tools and
tests that read recipe values), following the same merge rules.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "BASE_KEY",
    "CONFIG_OPTIONS",
    "NESTED_FILE_SUFFIXES",
    "RecipeBaseError",
    "anchored",
    "composed_recipe",
    "expand_recipe_bases",
    "merge_recipes",
    "names_a_file",
    "recipe_chain",
]

#: The top-level key naming a recipe's base files.
BASE_KEY = "base"
#: The command-line options naming a configuration file.
CONFIG_OPTIONS = ("--config", "-c")
_SUFFIXES = (".yaml", ".yml")
#: Values jsonargparse reads as a nested configuration file, relative to the file naming them.
NESTED_FILE_SUFFIXES = (".yaml", ".yml", ".json")


class RecipeBaseError(ValueError):
    """A ``base:`` entry that cannot be used (missing, outside the recipe's folder, a cycle)."""


def _read(path: Path) -> Any:
    """The YAML of ``path``: a regular file, aliases' expansion bounded
    (:func:`~signorm_lab.safety.files.read_yaml`)."""
    from ..safety.files import read_yaml

    try:
        return read_yaml(path, "config")
    except ValueError as error:
        raise RecipeBaseError(str(error)) from None


def _base_paths(config: Mapping[str, Any], path: Path, root: Path) -> list[Path]:
    """The base files ``config`` (read from ``path``) names, checked to lie in ``root``."""
    names = config[BASE_KEY]
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise RecipeBaseError(
            f"{path}: `{BASE_KEY}:` must be a file name or a list of file names (relative to "
            f"this file), got {config[BASE_KEY]!r}."
        )
    bases = []
    for name in names:
        base = (path.parent / name).resolve()
        if not base.is_relative_to(root) or base.suffix not in _SUFFIXES:
            raise RecipeBaseError(
                f"{path}: base file {name!r} ({base}) is not a .yaml file inside {root}, the "
                f"folder of the recipe given on the command line (or one below it)."
            )
        if not base.is_file():
            what = (
                "is not a regular file (a named pipe, a device, a folder)"
                if base.exists()
                else "does not exist"
            )
            raise RecipeBaseError(
                f"{path}: base file {name!r} ({base}) {what}; a base is a YAML file."
            )
        bases.append(base)
    return bases


def recipe_chain(recipe: str | Path) -> list[tuple[Path, dict[str, Any]]]:
    """The files ``recipe`` is composed of, in the order they apply, each without ``base:``.

    Bases first (each preceded by its own bases, a base named twice applied once), ``recipe``
    last; each as ``(path, content)``.

    Raises:
        RecipeBaseError: If a base is missing, outside the recipe's folder, not a mapping, or
            the bases form a cycle.
    """
    recipe = Path(recipe)
    root = recipe.resolve().parent
    chain: list[tuple[Path, dict[str, Any]]] = []
    done: set[Path] = set()

    def visit(path: Path, shown: Path, stack: tuple[Path, ...]) -> None:
        config = _read(path)
        if config is None:
            config = {}
        if not isinstance(config, dict):
            raise RecipeBaseError(
                f"{shown}: a recipe or base file must be a mapping, got {type(config).__name__}."
            )
        if BASE_KEY in config:
            for base in _base_paths(config, shown, root):
                if base in stack:
                    cycle = " -> ".join(str(p) for p in (*stack, base))
                    raise RecipeBaseError(f"{shown}: base files form a cycle: {cycle}.")
                if base not in done:
                    visit(base, base, (*stack, base))
            config = {key: value for key, value in config.items() if key != BASE_KEY}
        done.add(path.resolve())
        chain.append((shown, config))

    visit(recipe, recipe, (recipe.resolve(),))
    return chain


def merge_recipes(earlier: Any, later: Any) -> Any:
    """``later`` over ``earlier`` as jsonargparse merges two ``--config`` files.

    Mappings merge key by key, but a ``class_path`` block naming another class replaces the
    earlier block; a ``key+`` list is appended to the earlier ``key``; anything else replaces.
    """
    if not (isinstance(earlier, dict) and isinstance(later, dict)):
        return copy.deepcopy(later)
    if "class_path" in later and earlier.get("class_path") not in (None, later["class_path"]):
        return copy.deepcopy(later)
    merged = copy.deepcopy(earlier)
    for key, value in later.items():
        if key.endswith("+") and isinstance(value, list):
            name = key[:-1]
            previous = merged.get(name)
            merged[name] = [
                *(previous if isinstance(previous, list) else []),
                *copy.deepcopy(value),
            ]
        else:
            merged[key] = (
                merge_recipes(merged[key], value) if key in merged else (copy.deepcopy(value))
            )
    return merged


def composed_recipe(recipe: str | Path) -> dict[str, Any]:
    """The recipe with its base files merged in, as a plain dict (nothing parsed or imported).

    A recipe without ``base:`` is returned as read. The command parses the same files with
    jsonargparse (:func:`expand_recipe_bases`); this is for code reading a recipe's values.
    """
    merged: dict[str, Any] = {}
    for _, config in recipe_chain(recipe):
        merged = merge_recipes(merged, config)
    return merged


def anchored(config: Any, folder: Path) -> Any:
    """``config`` (read from a file in ``folder``) with each nested configuration file it names
    by a relative path (a ``.yaml``/``.yml``/``.json`` file there) given by its absolute path:
    what jsonargparse would read from the file, it reads from the YAML string the command
    passes instead (a string's relative paths are read from the working directory)."""
    if isinstance(config, Mapping):
        return {key: anchored(value, folder) for key, value in config.items()}
    if isinstance(config, list):
        return [anchored(value, folder) for value in config]
    if (
        isinstance(config, str)
        and config.endswith(NESTED_FILE_SUFFIXES)
        and not Path(config).is_absolute()
        and (folder / config).is_file()
    ):
        return str((folder / config).resolve())
    return config


def names_a_file(value: str) -> bool:
    """Whether a ``--config`` value names a file (else it is a YAML string, or a mistake)."""
    try:
        return Path(value).is_file()
    except (OSError, ValueError):  # a YAML string given as --config
        return False


def _expanded(value: str) -> list[str] | None:
    """The ``--config`` values replacing ``value``, or ``None`` when it names no base."""
    if not names_a_file(value):
        try:
            config = yaml.safe_load(value)
        except yaml.YAMLError:
            return None
        if isinstance(config, dict) and BASE_KEY in config:
            raise RecipeBaseError(
                f"`{BASE_KEY}:` is read from recipe files only (its paths are relative to the "
                f"file); a configuration given as a string cannot name base files."
            )
        return None
    content = _read(Path(value))
    if not (isinstance(content, dict) and BASE_KEY in content):
        return None
    chain = recipe_chain(value)
    values = []
    for path, config in chain:
        original = _read(path)
        if isinstance(original, dict) and BASE_KEY in original:  # passed without its base:
            values.append(yaml.safe_dump(anchored(config, path.parent), sort_keys=False))
        else:
            values.append(str(path))
    return values


def expand_recipe_bases(args: Iterable[str]) -> list[str]:
    """Command-line ``args`` with each ``--config`` recipe naming base files expanded.

    ``--config R`` becomes ``--config B1 ... --config <R without base:>`` (a file naming bases
    of its own is passed as a YAML string), keeping the option's position and spelling
    (``--config X``, ``--config=X``, ``-c X``); other arguments are unchanged.

    Raises:
        RecipeBaseError: See :func:`recipe_chain`.
    """
    args = list(args)
    expanded: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        option = next((o for o in CONFIG_OPTIONS if arg == o or arg.startswith(f"{o}=")), None)
        if option is None or (arg == option and index + 1 >= len(args)):
            expanded.append(arg)
            index += 1
            continue
        joined = arg != option
        value = arg.removeprefix(f"{option}=") if joined else args[index + 1]
        values = _expanded(value) if isinstance(value, str) else None
        if values is None:
            expanded += [arg] if joined else [arg, value]
        else:
            for item in values:
                expanded += [f"{option}={item}"] if joined else [option, item]
        index += 1 if joined else 2
    return expanded
