"""A configuration the command cannot run is an error that says why, before anything trains."""

from __future__ import annotations

import pytest
from command_args import EXPERIMENTS, signorm_args

from signorm_lab.cli import cli_main, main


def test_recipe_inconsistency_fails_before_training(tmp_path, monkeypatch):
    """format_batch_fn repeating 2x for M = 4 fails when the routine is built, not in the loss."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"repeats the targets 2 times.*num_estimators=4"):
        cli_main(
            [
                "fit",
                *signorm_args(
                    "--routine.init_args.format_batch_fn=torch_uncertainty.transforms.RepeatTarget",
                    "--routine.init_args.format_batch_fn.init_args.num_repeats=2",
                ),
            ]
        )
    assert not (tmp_path / "logs").exists()  # no logger directory: nothing ran


def test_an_empty_training_set_is_an_error_naming_the_datamodule(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        ValueError,
        match=r"The training set of SyntheticDataModule is empty "
        r"\(0 samples\): there is nothing to fit",
    ):
        cli_main(["fit", *signorm_args("--data.init_args.num_samples=0", "--trainer.max_epochs=1")])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "--routine.init_args.target_diversity=1.5",
            "target_diversity must be a number in (0, 1), got 1.5.",
        ),
        (
            "--routine.init_args.model.init_args.member_spread=-1",
            "member_spread must be a finite number >= 0, got -1.0.",
        ),
    ],
)
def test_a_constructor_error_is_the_last_line_of_the_command(
    override, message, tmp_path, monkeypatch, capsys
):
    """jsonargparse reports a constructor's ValueError inside its Union report, which ends with
    the whole configuration; the command says the constructor's message last."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(["fit", "--config", str(EXPERIMENTS / "digits_signorm.yaml"), override])
    assert stop.value.code == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == f"torch-uncertainty: invalid configuration: ValueError: {message}"


def test_a_recipe_giving_a_key_twice_is_one_line_naming_it(tmp_path, monkeypatch, capsys):
    """The YAML reader's refusal reaches the terminal as itself, without the parser's traceback
    or the inner error it replaced."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.yaml").write_text("optimizer:\n  lr: 0.05\n  'lr': 0.9\n")
    with pytest.raises(SystemExit) as stop:
        main(["fit", "--config", "r.yaml", "--print_config"])
    error = capsys.readouterr().err
    assert stop.value.code != 0 and "Traceback" not in error and "DuplicateKey" not in error
    assert "gives the key 'lr' twice (lines 2 and 3)" in error.strip().splitlines()[-1]
