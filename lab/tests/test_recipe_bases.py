"""Recipes extending base files (``base:``): merged by the command's parser, one ``--config``."""

from __future__ import annotations

import contextlib
import io
import sys
import warnings
from pathlib import Path

import pytest
import yaml

from fixtures.marker_module import assert_not_imported, marker_module
from signorm_lab.cli import cli_main
from signorm_lab.cli.export import main as export_main
from signorm_lab.cli.recipe_bases import (
    RecipeBaseError,
    composed_recipe,
    expand_recipe_bases,
    merge_recipes,
    recipe_chain,
)
from signorm_lab.cli.recipe_parsing import parse_recipe
from signorm_lab.cli.tu_recipes import tu_format_args

EXPERIMENTS = Path(__file__).parents[2] / "experiments"
DIGITS = EXPERIMENTS / "digits_signorm.yaml"
#: One recipe per base file of experiments/base/.
ONE_PER_BASE = [
    "resnet18_c10_signorm",
    "wrn_c100_film",
    "vit_c100_signorm",
    "bert_sst2_single",
    "tweets_minilm_signorm",
    "digits_study_packed",
    "tweets_study_single",
]


def _print_config(monkeypatch, *args: str) -> dict:
    monkeypatch.setattr("sys.argv", ["torch-uncertainty"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as stop:
        cli_main(["fit", *args, "--print_config"])
    assert stop.value.code in (0, None)
    return yaml.safe_load(out.getvalue())


def _write(path: Path, config: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.fixture
def digits_with_base(tmp_path) -> Path:
    """digits_signorm.yaml split into a base (seed, trainer at 3 epochs) and a recipe (7)."""
    config = yaml.safe_load(DIGITS.read_text())
    base = {key: config.pop(key) for key in ("seed_everything", "eval_after_fit", "trainer")}
    base["trainer"]["max_epochs"] = 3
    _write(tmp_path / "recipes" / "base" / "cpu.yaml", base)
    recipe = {"base": ["base/cpu.yaml"], "trainer": {"max_epochs": 7}, **config}
    return _write(tmp_path / "recipes" / "digits.yaml", recipe)


def test_recipe_values_override_the_base_and_print_config_shows_the_merge(
    digits_with_base, monkeypatch
):
    merged = _print_config(monkeypatch, "--config", str(digits_with_base))
    flat = _print_config(monkeypatch, "--config", str(DIGITS), "--trainer.max_epochs=7")
    assert merged["trainer"]["max_epochs"] == 7
    assert merged == flat
    assert "base" not in merged


def test_the_command_line_still_overrides_a_composed_recipe(digits_with_base, monkeypatch):
    merged = _print_config(monkeypatch, f"--config={digits_with_base}", "--trainer.max_epochs=2")
    assert merged["trainer"]["max_epochs"] == 2


@pytest.mark.parametrize("name", ONE_PER_BASE)
def test_experiments_print_config_equals_its_self_contained_form(name, tmp_path, monkeypatch):
    """The parser's merge of each base file of experiments/ is :func:`composed_recipe`'s, and
    that self-contained form runs by itself (as the generated TorchUncertainty recipes do)."""
    recipe = EXPERIMENTS / f"{name}.yaml"
    assert "base" in yaml.safe_load(recipe.read_text())
    flat = _write(tmp_path / "flat.yaml", composed_recipe(recipe))
    assert _print_config(monkeypatch, "--config", str(recipe)) == _print_config(
        monkeypatch, "--config", str(flat)
    )


def test_parse_recipe_reads_the_bases():
    config = parse_recipe(EXPERIMENTS / "resnet18_c10_single.yaml")
    assert config.trainer.max_epochs == 75 and config.trainer.precision == "16-mixed"
    assert [c.class_path.rpartition(".")[2] for c in config.trainer.callbacks] == [
        "TUClsCheckpoint",
        "ParameterCountCallback",
        "ExactResumeCheckpoint",
        "LearningRateMonitor",
        "EarlyStopping",
    ]


def test_a_missing_base_file_is_an_error_naming_it(tmp_path):
    recipe = _write(tmp_path / "recipe.yaml", {"base": ["base/nowhere.yaml"], "trainer": {}})
    with pytest.raises(
        RecipeBaseError,
        match=r"recipe.yaml: base file 'base/nowhere.yaml' "
        r"\(.*base/nowhere.yaml\) does not exist",
    ):
        cli_main(["fit", "--config", str(recipe), "--print_config"])


@pytest.mark.parametrize("name", ["../outside.yaml", "absolute", "base/notes.txt"])
def test_a_base_outside_the_recipe_folder_is_refused(name, tmp_path):
    _write(tmp_path / "outside.yaml", {"trainer": {"max_epochs": 1}})
    if name == "absolute":  # a YAML file by its absolute path, outside the recipe's folder
        name = str(tmp_path / "outside.yaml")
    (tmp_path / "recipes" / "base").mkdir(parents=True)
    (tmp_path / "recipes" / "base" / "notes.txt").write_text("trainer: {}\n")
    recipe = _write(tmp_path / "recipes" / "recipe.yaml", {"base": name})
    with pytest.raises(
        RecipeBaseError,
        match=rf"base file '{name}' .* is not a .yaml file inside "
        rf".*recipes, the folder of the recipe",
    ):
        expand_recipe_bases(["fit", "--config", str(recipe)])


def test_bases_of_bases_apply_first_and_cycles_are_errors(tmp_path):
    _write(tmp_path / "base" / "a.yaml", {"base": "b.yaml", "trainer": {"max_epochs": 1}})
    _write(tmp_path / "base" / "b.yaml", {"trainer": {"max_epochs": 2, "devices": 1}})
    recipe = _write(tmp_path / "recipe.yaml", {"base": ["base/a.yaml"], "seed_everything": 0})
    assert [path.name for path, _ in recipe_chain(recipe)] == ["b.yaml", "a.yaml", "recipe.yaml"]
    assert composed_recipe(recipe) == {
        "trainer": {"max_epochs": 1, "devices": 1},
        "seed_everything": 0,
    }
    args = expand_recipe_bases(["fit", "--config", str(recipe), "--trainer.devices=2"])
    assert args[:3] == ["fit", "--config", str((tmp_path / "base" / "b.yaml").resolve())]
    assert [yaml.safe_load(a) for a in args[4:7:2]] == [
        {"trainer": {"max_epochs": 1}},
        {"seed_everything": 0},
    ]
    assert args[-1] == "--trainer.devices=2"
    _write(tmp_path / "base" / "b.yaml", {"base": "a.yaml"})
    with pytest.raises(RecipeBaseError, match=r"base files form a cycle"):
        recipe_chain(recipe)


def test_lists_are_replaced_unless_appended_with_plus():
    base = {
        "trainer": {
            "callbacks": [{"class_path": "A"}],
            "logger": {"class_path": "L", "init_args": {"save_dir": "logs"}},
        }
    }
    assert merge_recipes(base, {"trainer": {"callbacks": [{"class_path": "B"}]}})["trainer"][
        "callbacks"
    ] == [{"class_path": "B"}]
    merged = merge_recipes(
        base,
        {
            "trainer": {
                "callbacks+": [{"class_path": "B"}],
                "logger": {"init_args": {"name": "run"}},
            }
        },
    )
    assert merged["trainer"] == {
        "callbacks": [{"class_path": "A"}, {"class_path": "B"}],
        "logger": {"class_path": "L", "init_args": {"save_dir": "logs", "name": "run"}},
    }
    other = merge_recipes(base, {"trainer": {"logger": {"class_path": "M"}}})
    assert other["trainer"]["logger"] == {"class_path": "M"}  # another class: a new block


def test_plus_appends_to_the_base_callbacks_in_the_command_too(digits_with_base, monkeypatch):
    config = yaml.safe_load(digits_with_base.read_text())
    config["trainer"]["callbacks+"] = [
        {"class_path": "lightning.pytorch.callbacks.LearningRateMonitor"}
    ]
    _write(digits_with_base, config)
    callbacks = _print_config(monkeypatch, "--config", str(digits_with_base))["trainer"][
        "callbacks"
    ]
    names = [callback["class_path"].rpartition(".")[2] for callback in callbacks]
    assert names == [
        "ModelCheckpoint",  # the digits recipes test the checkpoint of best validation NLL
        "ParameterCountCallback",
        "ExactResumeCheckpoint",
        "MemberOwnershipCallback",
        "LearningRateMonitor",
    ]
    assert [c["class_path"] for c in composed_recipe(digits_with_base)["trainer"]["callbacks"]] == [
        c["class_path"] for c in callbacks
    ]


def test_a_base_naming_a_class_off_the_allow_list_is_refused_by_export(
    digits_with_base, tmp_path, monkeypatch
):
    """The export command checks every file of the chain before the parser imports anything."""
    name, marker = marker_module(tmp_path, monkeypatch, "evil_base_model")
    base = yaml.safe_load((digits_with_base.parent / "base" / "cpu.yaml").read_text())
    base["routine"] = {"init_args": {"model": {"class_path": f"{name}.Evil"}}}
    _write(digits_with_base.parent / "base" / "cpu.yaml", base)
    with pytest.raises(
        ValueError,
        match=rf"base/cpu.yaml: .*'{name}.Evil' is not an allowed "
        rf"class path",
    ):
        export_main(
            [
                "--config",
                str(digits_with_base),
                "--ckpt_path",
                str(tmp_path / "x.ckpt"),
                "--output",
                str(tmp_path / "export"),
            ]
        )
    assert_not_imported(name, marker)


def test_a_configuration_string_cannot_name_bases():
    with pytest.raises(RecipeBaseError, match=r"read from recipe files only"):
        expand_recipe_bases(["fit", "--config", "base: [a.yaml]\ntrainer: {}"])
    assert expand_recipe_bases(["fit", "--config", "trainer: {max_epochs: 1}"]) == [
        "fit",
        "--config",
        "trainer: {max_epochs: 1}",
    ]


@pytest.mark.parametrize(
    ("where", "option"), [("recipe", "--config"), ("base", "--config"), ("recipe", "-c")]
)
def test_a_moved_class_path_in_a_recipe_or_its_base_reads_as_todays(
    digits_with_base, where, option, monkeypatch
):
    """A recipe chain written before a class path moved (``MOVED_CLASS_PATHS``): the path is
    read as its current one before anything imports it, in the recipe naming the base and in the
    base, given by ``--config`` or ``-c``; the base still applies, and a nested file the recipe
    names relative to its folder (``data: data.yaml``) is still read from there."""
    scheduler = {
        "class_path": "torch_uncertainty_signorm.lr_schedulers.WarmupCosineLR",
        "init_args": {"total_steps": 50, "warmup_steps": 5},
    }
    path = digits_with_base if where == "recipe" else digits_with_base.parent / "base/cpu.yaml"
    _write(path, {**yaml.safe_load(path.read_text()), "lr_scheduler": scheduler})
    recipe = yaml.safe_load(digits_with_base.read_text())
    _write(digits_with_base.parent / "data.yaml", recipe.pop("data"))
    _write(digits_with_base, {**recipe, "data": "data.yaml"})
    monkeypatch.delitem(sys.modules, "torch_uncertainty_signorm.lr_schedulers", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        merged = _print_config(monkeypatch, option, str(digits_with_base))
    assert not [w for w in caught if "lr_schedulers is deprecated" in str(w.message)]
    assert merged["lr_scheduler"]["class_path"] == (
        "torch_uncertainty_signorm.optim_recipes.WarmupCosineLR"
    )
    assert merged["data"]["class_path"].endswith("DigitsDataModule")
    assert merged["trainer"]["max_epochs"] == 7 and merged["seed_everything"] is not None


def test_a_moved_class_path_given_on_the_command_line_is_read_as_todays():
    old = "torch_uncertainty_signorm.offline_assets.minilm_classifier"
    new = "signorm_lab.models.packaged.minilm_classifier"
    args = tu_format_args(["fit", f"--model.init_args.model.class_path={old}", "--model", old])
    assert args[-2:] == ["--model", new] and f"--model.init_args.model.class_path={new}" in args
