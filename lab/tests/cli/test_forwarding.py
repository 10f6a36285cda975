"""What the command hands the routine: the datamodule's eval_ood / eval_shift / num_tta, the
routine block as hyper-parameters, M from the model alone."""

from __future__ import annotations

import pytest
from command_args import HParamsRoutine, PlainRoutine, class_path_of, routine_args, signorm_args
from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.cli import SaveConfigCallback
from torch_uncertainty.utils.cli import TULightningCLI, TUSaveConfigCallback

from signorm_lab.cli import cli_main


@pytest.mark.parametrize(
    ("eval_ood", "eval_shift", "num_tta"), [(True, False, 1), (False, True, 2), (True, True, 4)]
)
def test_datamodule_args_reach_the_routine(eval_ood, eval_shift, num_tta, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = routine_args(eval_ood=eval_ood, eval_shift=eval_shift, num_tta=num_tta)
    cli = cli_main(args, run=False)
    for key in ("eval_ood", "eval_shift", "num_tta"):
        assert getattr(cli.routine, key) == getattr(cli.datamodule, key)
    assert cli.forwarded_data_args == {
        "eval_ood": eval_ood,
        "eval_shift": eval_shift,
        "num_tta": num_tta,
    }


def test_tu_links_do_nothing_with_class_paths(tmp_path, monkeypatch):
    """The claim this CLI fixes: TU's own CLI in subclass mode leaves the routine's values alone."""
    monkeypatch.chdir(tmp_path)
    args = routine_args(eval_ood=True, eval_shift=True, num_tta=2)
    cli = TULightningCLI(
        LightningModule,
        LightningDataModule,
        subclass_mode_model=True,
        subclass_mode_data=True,
        run=False,
        args=args,
    )
    assert (cli.datamodule.eval_ood, cli.datamodule.eval_shift, cli.datamodule.num_tta) == (
        True,
        True,
        2,
    )
    assert (cli.routine.eval_ood, cli.routine.eval_shift, cli.routine.num_tta) == (False, False, 1)
    # TU 0.13 also defaults to no config-saving callback; the command adds TU's own.
    assert not any(isinstance(c, SaveConfigCallback) for c in cli.trainer.callbacks)
    ours = cli_main(args, run=False)
    assert any(isinstance(c, TUSaveConfigCallback) for c in ours.trainer.callbacks)


def test_datamodule_wins_over_a_conflicting_routine_value(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = [*routine_args(eval_ood=False), "--routine.init_args.eval_ood=true"]
    with pytest.warns(
        UserWarning, match="eval_ood=True replaced by the datamodule's eval_ood=False"
    ):
        cli = cli_main(args, run=False)
    assert cli.routine.eval_ood is False


def test_routines_without_those_arguments_are_left_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cli = cli_main(routine_args(routine=class_path_of(PlainRoutine), eval_ood=True), run=False)
    assert isinstance(cli.routine, PlainRoutine)
    assert cli.forwarded_data_args == {}


def test_routine_hyperparameters_hold_the_routine_block(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = [
        *routine_args(routine=class_path_of(HParamsRoutine), eval_ood=True),
        "--routine.init_args.num_classes=10",
    ]
    cli = cli_main(args, run=False)
    hparams = cli.routine.hparams
    assert hparams["_class_path"] == class_path_of(HParamsRoutine)
    assert hparams["num_classes"] == 10
    assert hparams["eval_ood"] is True  # the forwarded value


def test_signorm_recipes_take_members_from_the_model_alone(tmp_path, monkeypatch):
    """One path sets M: the routine's RepeatTarget and is_ensemble follow the model's."""
    monkeypatch.chdir(tmp_path)
    cli = cli_main(signorm_args("--routine.init_args.model.init_args.num_estimators=2"), run=False)
    assert cli.routine.model.num_estimators == 2
    assert cli.routine.format_batch_fn.num_repeats == 2 and cli.routine.is_ensemble is True
