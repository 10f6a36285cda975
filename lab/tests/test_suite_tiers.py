"""The suite's own rules: the tier rule names files that exist, CI does not skip the
TorchUncertainty-recipe tests, and ruff's rule set (pyproject.toml) holds."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tiers import FAST_TIER_RECIPES, SECOND_TIER, TESTS, in_second_tier, second_tier_recipe

#: The repository's root (the lab is its lab/ folder): the recipes, and ruff's whole tree.
ROOT = TESTS.parents[1]


def test_every_second_tier_path_exists():
    """A renamed file would silently join the fast tier."""
    missing = [entry for entry in SECOND_TIER if not (TESTS / entry).exists()]
    assert not missing
    assert all((TESTS / entry).is_dir() == entry.endswith("/") for entry in SECOND_TIER)


@pytest.mark.parametrize(
    ("path", "second"),
    [
        ("journeys/test_journey_ddp.py", True),
        ("journeys/any_new_journey.py", True),
        ("test_distributed.py", True),
        ("reproduction/test_regression.py", True),
        ("reproduction/test_published_tables.py", False),
        ("test_config.py", False),
        ("test_journeys.py", False),  # a prefix of a folder's name is not the folder
    ],
)
def test_the_tier_of_a_file_follows_its_path(path, second):
    assert in_second_tier(TESTS / path) is second


def test_per_recipe_tests_keep_a_representative_few_in_the_fast_tier():
    experiments = ROOT / "experiments"
    assert all((experiments / f"{name}.yaml").is_file() for name in FAST_TIER_RECIPES)
    assert not second_tier_recipe(
        "test_recipe_parses", {"recipe": experiments / "digits_signorm.yaml"}
    )
    assert second_tier_recipe(
        "test_recipe_parses", {"recipe": experiments / "wrn_c100_signorm.yaml"}
    )
    assert not second_tier_recipe(
        "test_a_release_recipe_resolves_to_todays_recipe", {"name": "resnet18_c10_signorm"}
    )
    assert not second_tier_recipe(
        "test_recipe_is_consistent", {"recipe": experiments / "wrn_c100_signorm.yaml"}
    )


@pytest.mark.parametrize("required", [False, True], ids=["developer", "ci"])
def test_a_missing_torch_uncertainty_recipe_folder_skips_only_outside_ci(
    required, tmp_path, monkeypatch
):
    import test_tu_format_recipes as tu

    absent = tmp_path / "no-recipes"
    monkeypatch.setattr(tu, "TU_REPO", None)
    monkeypatch.setattr(tu, "TU_RECIPES_COPY", absent)
    monkeypatch.setenv("SIGNORM_REQUIRE_TU_RECIPES", "1" if required else "0")
    outcome = pytest.fail.Exception if required else pytest.skip.Exception
    with pytest.raises(outcome) as stop:
        tu._tu_recipe(tu.TU_RECIPES[0], tmp_path)
    assert str(absent / tu.TU_RECIPES[0]) in str(stop.value)
    if required:
        assert f"CI needs TorchUncertainty's recipes at {absent}" in str(stop.value)


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff_finds_nothing(command):
    """``ruff check`` with pyproject.toml's rule set, and ``ruff format``'s layout, over the
    whole tree (src/ included): one formatter, no style debate."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "--no-cache", "--quiet", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_a_whole_tier_prints_its_time_and_fails_over_its_budget(tmp_path):
    """The suite's own conftest.py and tiers.py on a one-test suite whose fast budget is 0 s."""
    for name in ("conftest.py", "tiers.py"):
        text = (TESTS / name).read_text()
        if name == "tiers.py":
            text = text.replace('TIER_BUDGETS = {"fast": ', 'TIER_BUDGETS = {"fast": 0, "x": ')
        (tmp_path / name).write_text(text)
    (tmp_path / "fixtures").mkdir()  # the report both suites print
    (tmp_path / "fixtures" / "budget.py").write_text(
        (TESTS.parents[1] / "tests" / "fixtures" / "budget.py").read_text()
    )
    # The synthetic suite's one test passes on purpose: the run may fail on its time alone.
    (tmp_path / "test_one.py").write_text("def test_one():\n    assert True\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\ntestpaths = .\n")
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        "not slow",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
    ]
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert run.returncode == 1, run.stdout + run.stderr
    assert re.search(r"fast tier: \d+ s of its 0 s budget .*OVER BUDGET", run.stdout)
    assert "1 passed" in run.stdout
    # The suite's folder given from above it (as the README's command does) is the whole tier.
    folder = subprocess.run(
        [*command, str(tmp_path)], cwd=tmp_path.parent, capture_output=True, text=True, check=False
    )
    assert folder.returncode == 1 and "OVER BUDGET" in folder.stdout, folder.stdout
    # A run of chosen files is no tier: no verdict on its time.
    files = subprocess.run(
        [*command, "test_one.py"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert files.returncode == 0 and "tier:" not in files.stdout
