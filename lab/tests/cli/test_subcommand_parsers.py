"""A run builds the parser of the subcommand it names only: each subcommand's parser reads the
signatures of the trainer, routine and datamodule classes, seconds of every command's start-up."""

from __future__ import annotations

import pytest
from lightning.pytorch.cli import LightningCLI

from signorm_lab.cli import cli_main

RECIPE = "experiments/digits_signorm.yaml"


class _Built(Exception):
    """Raised in place of building the subcommand parsers, carrying the subcommands asked for."""


@pytest.fixture
def subcommands_built(monkeypatch):
    def record(cli, parser, **kwargs):
        raise _Built(list(cli.subcommands()))

    monkeypatch.setattr(LightningCLI, "_add_subcommands", record)


@pytest.mark.parametrize("subcommand", ["fit", "validate", "test", "predict"])
def test_a_command_line_naming_its_subcommand_builds_that_parser_only(
    subcommands_built, subcommand
):
    with pytest.raises(_Built) as built:
        cli_main([subcommand, "--config", RECIPE])
    assert built.value.args[0] == [subcommand]


@pytest.mark.parametrize(
    "args",
    [["--config", RECIPE, "fit"], ["fitt", "--config", RECIPE]],
    ids=["config-first", "typo"],
)
def test_any_other_command_line_gets_every_subcommand(subcommands_built, args):
    """A top-level ``--config`` before the subcommand, or a misspelt one (whose error lists the
    valid choices)."""
    with pytest.raises(_Built) as built:
        cli_main(args)
    assert built.value.args[0] == list(LightningCLI.subcommands())
