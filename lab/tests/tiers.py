"""The suite's two tiers, decided here and applied by tests/conftest.py.

The fast tier (``python -m pytest -m "not slow"``) is what a change is checked with; the second
tier (``-m slow``) holds the journeys, the recipe runs, DDP, the tests that start other
processes, every recipe but a representative few where a test runs once per recipe, and every
test marked ``slow`` where it stands (one that takes more than a few seconds).
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent

#: Second tier by path (relative to tests/): folders end with "/". A new test in one of them
#: joins the second tier without a marker.
SECOND_TIER = (
    "journeys/",  # the user's journeys through the command, end to end
    # recipe runs: recipes trained through the command
    "test_recipes_run.py",
    "test_transformer_recipes_run.py",
    "test_real_minilm_recipes.py",
    "test_quickstart.py",
    "test_tu_format_recipes.py",
    "test_mlflow_recipe.py",
    "cli/test_recipe_fits.py",
    "test_distributed.py",  # DDP, in worker processes
    # tests that start other processes (the command, scripts, vermin)
    "test_console.py",
    "test_head_scale.py",
    "test_cpu_and_stand_in.py",
    "test_python_range.py",
    "reproduction/test_regression.py",
    "reproduction/test_run_groups.py",
)

#: Tests that run once per recipe through the command's parser (several seconds each): the fast
#: tier keeps the recipes below, the second tier the rest.
PER_RECIPE_TESTS = (
    "test_recipe_parses",
    "test_experiments_print_config_equals_its_self_contained_form",
    "test_a_release_recipe_resolves_to_todays_recipe",
)
FAST_TIER_RECIPES = ("digits_signorm", "resnet18_c10_signorm")

#: Wall-clock budget of each whole tier in seconds (collection included), checked by
#: tests/conftest.py when a tier runs whole (``-m "not slow"`` or ``-m slow``, no paths): over
#: it, the run fails. CI machines of the same kind differ by up to 2x in speed, so each budget is
#: about twice what a clean-clone ``bash .ci/run`` took on an idle 2-core machine (fast tier 1,488
#: tests in 81 s, second tier 424 tests in 770 s, the whole run 17 min 49 s, install included; a
#: later run: 1,489 tests in 89 s, 424 in 653 s, 15 min 21 s; then, with the YAML-only recipe
#: checks in the fast tier: 1,594 tests in 83 s, 323 in 672 s, 15 min 35 s; the latest, with
#: journeys merged where they could share a started process: 1,598 in 85 s, 317 in 658 s,
#: 15 min 23 s);
#: the targets are 120 s and 780 s on the slower machine (the whole CI in 20 minutes).
TIER_BUDGETS = {"fast": 180, "second": 1500}
#: The ``-m`` expression of each tier, as the README's test command writes it.
TIER_MARKERS = {"not slow": "fast", "slow": "second"}


def whole_tier(markexpr: str, whole_suite: bool) -> str | None:
    """The tier a pytest run is, when it runs one whole (the suite's folder, or no paths given),
    else ``None``."""
    return TIER_MARKERS.get(markexpr.strip()) if whole_suite else None


def in_second_tier(path: Path) -> bool:
    """Whether the test file at ``path`` belongs to the second tier by where it is."""
    relative = Path(path).resolve().relative_to(TESTS).as_posix()
    return any(
        relative.startswith(entry) if entry.endswith("/") else relative == entry
        for entry in SECOND_TIER
    )


def second_tier_recipe(test_name: str, params: dict) -> bool:
    """Whether a per-recipe test's case, given its parameters, belongs to the second tier."""
    if test_name not in PER_RECIPE_TESTS:
        return False
    (recipe,) = (value for key, value in params.items() if key in ("recipe", "name"))
    return Path(str(recipe)).stem not in FAST_TIER_RECIPES
