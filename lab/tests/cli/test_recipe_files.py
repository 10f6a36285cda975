"""Every recipe in ``experiments/`` parses through the command and keeps the protocol's settings."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
import yaml
from command_args import EXPERIMENTS

from signorm_lab.cli import main
from signorm_lab.cli.recipe_bases import composed_recipe
from tiers import FAST_TIER_RECIPES

RECIPES = sorted(EXPERIMENTS.glob("*.yaml"))
#: Recipes that a test trains or builds through the command's parser (test_recipes_run.py,
#: test_transformer_recipes_run.py, test_real_minilm_recipes.py): parsing them alone again guards
#: nothing more, so only the others and the fast tier's representatives are parsed here.
RUN_ELSEWHERE = ("resnet", "wrn_", "digits_", "vit_", "bert_", "tweets_minilm_")
PARSED_RECIPES = [
    p for p in RECIPES if not p.stem.startswith(RUN_ELSEWHERE) or p.stem in FAST_TIER_RECIPES
]
#: The CIFAR benchmark recipes (the digits quickstart follows its own CPU protocol; the
#: transformer recipes are checked in test_transformer_recipes_run.py).
BENCHMARK_RECIPES = [
    p for p in RECIPES if not p.stem.startswith(("digits", "vit_", "bert_", "tweets_"))
]


def _load(path: Path) -> dict:
    return composed_recipe(path)  # with its base files merged in


def _uses_signorm(config: dict) -> bool:
    return config["routine"]["class_path"].startswith("torch_uncertainty_signorm")


def _find(tree, key: str) -> list:
    """Every value of ``key`` anywhere in a nested dict/list."""
    found = []
    if isinstance(tree, dict):
        for k, v in tree.items():
            if k == key:
                found.append(v)
            found += _find(v, key)
    elif isinstance(tree, list):
        for v in tree:
            found += _find(v, key)
    return found


def _class(path: str):
    module, _, name = path.rpartition(".")
    return getattr(__import__(module, fromlist=[name]), name)


def test_recipes_exist():
    names = {p.name for p in RECIPES}
    assert "wrn_c100_signorm.yaml" in names
    for backbone in ("resnet18", "resnet50", "wrn"):
        for dataset in ("c10", "c100"):
            for method in ("single", "packed", "signorm", "signorm_finetune"):
                assert f"{backbone}_{dataset}_{method}.yaml" in names


def test_readme_lists_every_recipe():
    readme = (EXPERIMENTS / "README.md").read_text()
    missing = [p.name for p in RECIPES if f"`{p.name}`" not in readme]
    assert not missing


@pytest.mark.parametrize("recipe", PARSED_RECIPES, ids=lambda p: p.stem)
def test_recipe_parses(recipe: Path):
    """Each recipe parses through the command's parser (class paths, argument names and types)."""
    config = _load(recipe)
    out, err = io.StringIO(), io.StringIO()
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        pytest.raises(SystemExit) as exit_info,
    ):
        main(["fit", "--config", str(recipe), "--print_config"])
    assert exit_info.value.code in (0, None), "error:" + err.getvalue().partition("error:")[2]
    resolved = yaml.safe_load(out.getvalue())
    assert resolved["routine"]["class_path"] == config["routine"]["class_path"]
    assert resolved["data"]["class_path"] == config["data"]["class_path"]


@pytest.mark.parametrize("recipe", BENCHMARK_RECIPES, ids=lambda p: p.stem)
def test_recipe_is_consistent(recipe: Path):
    """Class counts, ensemble sizes and the protocol's fixed settings agree within a recipe."""
    config = _load(recipe)
    routine, data = config["routine"]["init_args"], config["data"]
    num_classes = _class(data["class_path"]).num_classes
    assert routine["num_classes"] == num_classes
    assert set(_find(routine["model"], "num_classes")) == {num_classes}

    assert data["init_args"]["batch_size"] == 128
    assert data["init_args"]["root"] == "./data"
    assert config["trainer"]["precision"] == "16-mixed"
    assert config["eval_after_fit"] is True
    callbacks = [c["class_path"] for c in config["trainer"]["callbacks"]]
    assert "torch_uncertainty.callbacks.TUClsCheckpoint" in callbacks
    assert "optimizer" in config
    assert "optim_recipe" not in routine

    estimators = set(_find(routine["model"], "num_estimators"))
    if _uses_signorm(config):  # the routine derives them from the model's M: one place to set
        assert "format_batch_fn" not in routine and "is_ensemble" not in routine
        assert estimators == {4}
    elif estimators:
        assert estimators == {4}
        assert routine["is_ensemble"] is True
        batch_format = routine["format_batch_fn"]["init_args"]
        assert batch_format.get("num_repeats", batch_format.get("num_estimators")) == 4


def test_recipes_log_to_distinct_directories():
    targets = {}
    for recipe in RECIPES:
        logger = _load(recipe)["trainer"]["logger"]["init_args"]
        targets.setdefault((logger["save_dir"], logger["name"]), []).append(recipe.name)
    assert all(len(files) == 1 for files in targets.values()), targets


@pytest.mark.slow
def test_eval_after_fit_can_be_switched_off(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    recipe = str(EXPERIMENTS / "resnet18_c10_single.yaml")
    for flag, expected in (
        ([], True),
        (["--eval_after_fit=false"], False),
        (["--eval_after_fit"], True),
    ):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
            main(["fit", "--config", recipe, *flag, "--print_config"])
        assert yaml.safe_load(out.getvalue())["eval_after_fit"] is expected
