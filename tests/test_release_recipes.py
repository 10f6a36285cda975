"""Recipes written for release 0.1.0 (self-contained, before base files) still run through the
command, and resolve to the same configuration as today's recipes that extend base files.

``tests/fixtures/release_recipes/`` holds copies of three 0.1.0 recipes: a CIFAR CNN trained from
scratch, a ViT fine-tune and the tweets quickstart (MiniLM conversion).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
import yaml

from torch_uncertainty_signorm.cli import main

RELEASE = Path(__file__).parent / "fixtures" / "release_recipes"
EXPERIMENTS = Path(__file__).parents[1] / "experiments"


def _printed_config(recipe: Path) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as stop:
        main(["fit", "--config", str(recipe), "--print_config"])
    assert stop.value.code in (0, None)
    return yaml.safe_load(out.getvalue())


@pytest.mark.parametrize("name", sorted(p.stem for p in RELEASE.glob("*.yaml")))
def test_a_release_recipe_resolves_to_todays_recipe(name):
    old = _printed_config(RELEASE / f"{name}.yaml")
    new = _printed_config(EXPERIMENTS / f"{name}.yaml")
    # The recipes' own settings that changed since (controlled diversity) are named here.
    for config in (old, new):
        model = config["routine"]["init_args"]["model"]["init_args"]
        model.pop("member_spread", None)
        config["routine"]["init_args"].pop("target_diversity", None)
    assert old == new
