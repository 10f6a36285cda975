"""Read a recipe exactly as the ``torch-uncertainty`` command does, without building anything.

Tools working from a recipe (the export command) must see the values the command trains
with: :class:`~signorm_lab.cli.TUSigmaNormCLI`'s jsonargparse parser
normalizes them (``style: CIFAR`` becomes ``ResNetStyle.CIFAR``, defaults are filled in,
command-line overrides apply), which reading the YAML file directly does not.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jsonargparse import Namespace
from lightning.pytorch.cli import ArgsType, LightningArgumentParser

from . import TUSigmaNormCLI
from .console import one_line_parser_class

__all__ = ["parse_recipe"]


class _ParseOnlyCLI(TUSigmaNormCLI):
    """The command's parser and parsing hooks; seeds nothing and instantiates nothing."""

    def parse_arguments(self, parser: LightningArgumentParser, args: ArgsType) -> None:
        """As the command's, for ``args`` given alone: they are the recipe's, never mixed with the
        process's own command line, so Lightning's warning against giving both does not apply."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "LightningCLI's args parameter")
            super().parse_arguments(parser, args)

    def _set_seed(self) -> None:
        """Leave the global random state alone (the command seeds before training)."""

    def instantiate_classes(self) -> None:
        """Build nothing: neither routine, nor datamodule, nor trainer."""

    def after_instantiate_classes(self) -> None:
        """Nothing was built."""

    def _run_subcommand(self, subcommand: str) -> None:
        """Run nothing: the recipe is only read."""


def parse_recipe(
    config: str | Path, overrides: Sequence[str] = (), raising: bool = False
) -> Namespace:
    """The parsed, normalized configuration of ``config``, as the command would train it.

    Args:
        config: The recipe (or a run's saved ``config.yaml``).
        overrides: Command-line style overrides, e.g.
            ``["--routine.init_args.model.init_args.num_estimators=2"]``.
        raising: Raise an invalid recipe's error as a one-line ``ValueError`` instead of
            printing it and exiting.

    Returns:
        The jsonargparse namespace (``routine``, ``data``, ``trainer``, ...); class paths are
        imported to check them, but nothing is instantiated.

    Raises:
        FileNotFoundError: If ``config`` does not exist.
        SystemExit: If the recipe is invalid (the command's error message is printed).
        ValueError: Instead, with ``raising``.
    """
    if not Path(config).is_file():
        raise FileNotFoundError(f"config={str(config)!r} does not exist.")
    # Parsed as `fit` reads it, so that a run's saved config.yaml (which holds `ckpt_path`) is
    # read too.
    args: list[Any] = ["fit", "--config", str(config), *overrides]
    kwargs = {"parser_class": one_line_parser_class(raising=True)} if raising else {}
    cli = _ParseOnlyCLI(args=args, save_config_callback=None, **kwargs)  # args: never sys.argv
    return cli.config["fit"]
