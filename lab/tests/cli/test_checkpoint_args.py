"""``--ckpt_path``: the recipe names the classes, the checkpoint only fills unset values, and
nothing a checkpoint names is imported or built."""

from __future__ import annotations

import pytest
from command_args import ROUTINE, SIGNORM_ROUTINE, crafted_checkpoint, routine_args, signorm_args

from signorm_lab.cli import TUSigmaNormCLI, cli_main


def test_checkpoint_routine_class_is_never_imported(tmp_path, monkeypatch):
    from fixtures.marker_module import assert_not_imported, marker_module

    monkeypatch.chdir(tmp_path)
    name, marker = marker_module(tmp_path, monkeypatch, "ckpt_routine_marker")
    ckpt = crafted_checkpoint(
        tmp_path,
        {
            "_class_path": f"{name}.Evil",
            "_instantiator": "lightning.pytorch.cli.instantiate_module",
        },
    )
    with pytest.raises(ValueError, match=rf"saved by the routine '{name}.Evil'.*'{ROUTINE}'"):
        cli_main(["test", *routine_args(), "--ckpt_path", ckpt])
    assert_not_imported(name, marker)


def test_checkpoint_model_class_is_never_imported(tmp_path, monkeypatch):
    from fixtures.marker_module import assert_not_imported, marker_module

    monkeypatch.chdir(tmp_path)
    name, marker = marker_module(tmp_path, monkeypatch, "ckpt_model_marker")
    ckpt = crafted_checkpoint(
        tmp_path,
        {"_class_path": SIGNORM_ROUTINE, "model": {"class_path": f"{name}.Evil", "init_args": {}}},
    )
    with pytest.raises(
        ValueError,
        match=r"model.class_path='ckpt_model_marker.Evil' where the "
        r"recipe has 'torch_uncertainty_signorm.signorm_ensemble'",
    ):
        cli_main(["test", *signorm_args(), "--ckpt_path", ckpt])
    assert_not_imported(name, marker)


@pytest.mark.parametrize("command_line", [True, False], ids=["command_line", "recipe"])
def test_checkpoint_values_never_override_given_ones(command_line, tmp_path, monkeypatch):
    """M = 3 saved, 4 given explicitly (on the command line, or by the recipe alone)."""
    monkeypatch.chdir(tmp_path)
    ckpt = crafted_checkpoint(
        tmp_path,
        {
            "_class_path": SIGNORM_ROUTINE,
            "model": {
                "class_path": "torch_uncertainty_signorm.signorm_ensemble",
                "init_args": {"num_estimators": 3},
            },
        },
    )
    given = ["--routine.init_args.model.init_args.num_estimators=4"] if command_line else []
    with pytest.raises(
        ValueError,
        match=r"model.init_args.num_estimators=3, but the recipe or "
        r"the command line sets 4",
    ):
        cli_main(["test", *signorm_args(*given), "--ckpt_path", ckpt])


def test_unset_values_come_from_the_checkpoint(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(TUSigmaNormCLI, "_run_subcommand", lambda self, subcommand: None)
    ckpt = crafted_checkpoint(
        tmp_path,
        {
            "_class_path": "torch_uncertainty_signorm.routines.classification."
            "SigmaNormClassificationRoutine",  # another name of the recipe's class
            "check_finite_loss": False,  # left at its default by the recipe
            "model": {
                "class_path": "torch_uncertainty_signorm.signorm_ensemble",
                "init_args": {"num_estimators": 4, "scale_init_std": 0.5},
            },
        },
    )
    cli = cli_main(["test", *signorm_args(), "--ckpt_path", ckpt])
    assert cli.routine.check_finite_loss is False
    assert cli.config.test.routine.init_args.model.init_args.scale_init_std == 0.5
    assert cli.routine.model.num_estimators == 4


def test_evaluation_arguments_given_with_a_checkpoint_are_used(tmp_path, monkeypatch):
    """``test --ckpt_path ... --routine.init_args.ood_criterion=entropy``: evaluation-only values
    do not change the trained model, so the given one wins; model values still must agree."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(TUSigmaNormCLI, "_run_subcommand", lambda self, subcommand: None)
    ckpt = crafted_checkpoint(
        tmp_path,
        {
            "_class_path": SIGNORM_ROUTINE,
            "ood_criterion": "msp",
            "save_to_csv": True,
            "csv_filename": "results.csv",
        },
    )
    cli = cli_main(
        [
            "test",
            *signorm_args(
                "--routine.init_args.ood_criterion=entropy",
                "--routine.init_args.csv_filename=eval.csv",
            ),
            "--ckpt_path",
            ckpt,
        ]
    )
    assert type(cli.routine.ood_criterion).__name__ == "EntropyCriterion"
    assert cli.routine.csv_filename == "eval.csv"
    assert cli.routine.save_to_csv is True  # the recipe's, equal to the checkpoint's


@pytest.mark.parametrize("form", ["yaml", "yaml_file", "class_name"])
def test_checkpoint_strings_read_as_classes_are_never_built(form, tmp_path, monkeypatch):
    """A checkpoint's ``format_batch_fn`` (left unset by every recipe, so taken from the
    checkpoint) given as a YAML class block, a YAML file or a class name is refused before
    jsonargparse reads it: nothing is imported, nothing built."""
    from fixtures.marker_module import assert_not_imported, marker_module

    monkeypatch.chdir(tmp_path)
    name, marker = marker_module(tmp_path, monkeypatch, "ckpt_string_marker")
    (tmp_path / "block.yaml").write_text(f"class_path: {name}.Evil\n")
    value = {
        "yaml": f"{{class_path: {name}.Evil}}",
        "yaml_file": "block.yaml",
        "class_name": "Identity",
    }[form]
    ckpt = crafted_checkpoint(tmp_path, {"_class_path": SIGNORM_ROUTINE, "format_batch_fn": value})
    with pytest.raises(
        ValueError,
        match=r"routine\.init_args\.format_batch_fn=.* is a string "
        r"where a class is expected",
    ):
        cli_main(["test", *signorm_args(), "--ckpt_path", ckpt])
    assert_not_imported(name, marker)


@pytest.mark.slow
def test_a_checkpoint_word_read_as_a_class_is_refused_after_parsing(tmp_path, monkeypatch):
    """``ood_criterion`` takes a criterion or a name: a checkpoint's plain word that the parser
    resolves to a class is refused before anything is built; a name is taken as before."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(TUSigmaNormCLI, "_run_subcommand", lambda self, subcommand: None)
    ckpt = crafted_checkpoint(
        tmp_path, {"_class_path": SIGNORM_ROUTINE, "ood_criterion": "EntropyCriterion"}
    )
    with pytest.raises(
        ValueError,
        match=r"ood_criterion was given as 'EntropyCriterion', which "
        r"the parser read as the class",
    ):
        cli_main(["test", *signorm_args(), "--ckpt_path", ckpt])
    ckpt = crafted_checkpoint(
        tmp_path, {"_class_path": SIGNORM_ROUTINE, "ood_criterion": "entropy"}
    )
    cli = cli_main(["test", *signorm_args(), "--ckpt_path", ckpt])
    assert type(cli.routine.ood_criterion).__name__ == "EntropyCriterion"
    assert cli.config.test.weights_only is True  # how Lightning then loads the checkpoint
