"""Each file is read once: the bytes a check read are the bytes parsed, even when the file is
replaced in between; and YAML is read as UTF-8 with each key given once, or refused in a line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from signorm_lab.cli import cli_main
from signorm_lab.cli import export as export_command
from signorm_lab.safety import allowlist
from signorm_lab.safety.files import load_yaml, read_once, read_regular, read_yaml
from tests.fixtures.marker_module import assert_not_imported, marker_module

ROUTINE = "torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine"
RESNET = "torch_uncertainty.models.classification.resnet"


def _recipe(backbone: str = RESNET) -> dict:
    model = {
        "class_path": "torch_uncertainty_signorm.signorm_ensemble",
        "init_args": {
            "model": {
                "class_path": backbone,
                "init_args": {"in_channels": 1, "num_classes": 10, "arch": 18, "style": "cifar"},
            },
            "num_estimators": 2,
        },
    }
    return {
        "routine": {"class_path": ROUTINE, "init_args": {"num_classes": 10, "model": model}},
        "data": {"class_path": "signorm_lab.datamodules.DigitsDataModule"},
    }


def test_a_file_read_twice_within_read_once_gives_its_first_bytes(tmp_path):
    path = tmp_path / "recipe.yaml"
    path.write_text("a: 1\n")
    with read_once():
        first = read_regular(path, "config")
        path.write_text("a: 2\n")
        assert read_yaml(str(path), "config") == {"a": 1}
    assert first == b"a: 1\n" and read_yaml(path, "config") == {"a": 2}


@pytest.mark.parametrize("swapped", ["recipe.yaml", "base.yaml"])
def test_a_recipe_replaced_after_the_exports_check_is_parsed_as_checked(
    swapped, tmp_path, monkeypatch
):
    """signorm-export checks each file of the recipe's chain, then parses: a file replaced right
    after its check (here by one naming a module that marks its import) is parsed as it was
    checked, never imported."""
    (tmp_path / "site").mkdir()
    name, marker = marker_module(tmp_path / "site", monkeypatch, "swapmark")
    monkeypatch.chdir(tmp_path)
    recipe, evil = _recipe(), _recipe(f"{name}.Evil")
    Path("base.yaml").write_text(yaml.safe_dump({"routine": recipe["routine"]}))
    Path("recipe.yaml").write_text(yaml.safe_dump({"base": "base.yaml", "data": recipe["data"]}))
    replacement = {
        "recipe.yaml": {"base": "base.yaml", **evil},
        "base.yaml": {"routine": evil["routine"]},
    }[swapped]
    check = allowlist.check_recipe

    def check_then_swap(tree, where, *args, **kwargs):
        check(tree, where, *args, **kwargs)
        if Path(where).name == swapped:
            Path(where).write_text(yaml.safe_dump(replacement))

    monkeypatch.setattr(allowlist, "check_recipe", check_then_swap)
    with pytest.raises(FileNotFoundError, match=r"ckpt_path='missing.ckpt' does not exist"):
        export_command.main(
            ["--config", "recipe.yaml", "--ckpt_path", "missing.ckpt", "--output", "out"]
        )  # parsed as checked, then the missing checkpoint stops it
    assert_not_imported(name, marker)


def test_the_commands_recipe_replaced_after_its_first_read_is_parsed_as_read(tmp_path, monkeypatch):
    """The torch-uncertainty command reads --config for the recipe format, then parses it: a
    file replaced in between is parsed as first read."""
    from signorm_lab.cli import tu_recipes

    monkeypatch.chdir(tmp_path)
    recipe = _recipe()
    recipe["routine"]["init_args"]["model"]["init_args"]["num_estimators"] = 3
    Path("recipe.yaml").write_text(yaml.safe_dump(recipe))
    normalize = tu_recipes.normalize_recipe

    def normalize_then_swap(tree):
        recipe["routine"]["init_args"]["model"]["init_args"]["num_estimators"] = 4
        Path("recipe.yaml").write_text(yaml.safe_dump(recipe))
        return normalize(tree)

    monkeypatch.setattr(tu_recipes, "normalize_recipe", normalize_then_swap)
    cli = cli_main(["--config", "recipe.yaml", "--trainer.logger=false"], run=False)
    assert cli.routine.model.num_estimators == 3


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"a: 1\nb: caf\xe9\n", r"is not UTF-8 text \(byte 0xe9 at offset 11\); save it as UTF-8"),
        (b"\xff\xfea: 1\n", r"is not UTF-8 text \(byte 0xff at offset 0\)"),
        (b"methods:\n  sn: 1\n  de: 2\n  sn: 3\n", r"gives the key 'sn' twice \(lines 2 and 4\)"),
        (b"- {a: 1, a: 2}\n", r"gives the key 'a' twice \(lines 1 and 1\)"),
        (b"1: x\n0x1: y\n", r"gives the key 1 twice \(lines 1 and 2\)"),
        (b"a: {<<: {x: 1}, <<: {x: 2}}\n", r"gives the key '<<' twice \(lines 1 and 1\)"),
    ],
)
def test_yaml_that_is_not_utf8_or_repeats_a_key_is_refused_in_one_line(data, said, tmp_path):
    (tmp_path / "c.yaml").write_bytes(data)
    with pytest.raises(ValueError, match=said) as error:
        read_yaml(tmp_path / "c.yaml", "--config")
    assert str(error.value).startswith(f"--config='{tmp_path / 'c.yaml'}'")
    assert "\n" not in str(error.value)


def test_a_merge_still_overrides_what_it_brings():
    assert load_yaml("b: &b {x: 1, y: 2}\nd:\n  <<: *b\n  x: 5\n", "c")["d"] == {"x": 5, "y": 2}


@pytest.mark.parametrize(
    "extra",
    [["-c", "other.yaml"], ["-cother.yaml"], ["-c=other.yaml"], ["--config", "other.yaml"]],
)
def test_a_second_recipe_is_refused_unread(extra, tmp_path, monkeypatch, capsys):
    """A recipe naming bases reaches the parser as a YAML string, which only the export's own
    check of --config sees: a second one among the overrides (``-c``) or a second --config
    (argparse would keep the last) is refused before anything is read."""
    (tmp_path / "site").mkdir()
    name, marker = marker_module(tmp_path / "site", monkeypatch, "secondmark")
    monkeypatch.chdir(tmp_path)
    Path("recipe.yaml").write_text(yaml.safe_dump(_recipe()))
    Path("benign.yaml").write_text(yaml.safe_dump({"trainer": {"max_epochs": 1}}))
    evil = {"base": "benign.yaml", "routine": _recipe(f"{name}.Evil")["routine"]}
    Path("other.yaml").write_text(yaml.safe_dump(evil))
    argv = ["--config", "recipe.yaml", "--ckpt_path", "none.ckpt", "--output", "out", *extra]
    with pytest.raises(SystemExit) as stopped:
        export_command.main(argv)
    error = capsys.readouterr().err
    assert stopped.value.code == 2 and error.count("\n") == 1
    assert "reads one recipe" in error
    assert_not_imported(name, marker)
