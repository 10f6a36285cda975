"""The ``torch-uncertainty`` command and the recipes in ``experiments/``.

Runs offline on CPU in seconds: recipes are parsed, not trained, except a few one-step or
one-epoch runs of ResNet-18 recipes on the random datamodule of
``tests/fixtures/synthetic_datamodule.py``, with the backbone narrowed through TU's
``width_multiplier`` (stem 64 -> 8 channels; depth, blocks, heads and every other recipe value
unchanged) and ``precision=32`` on the CPU.
"""

from __future__ import annotations

import contextlib
import io
import sys
import warnings
from pathlib import Path

import pytest
import torch
import yaml
from fixtures.synthetic_datamodule import SyntheticDataModule
from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.callbacks import ProgressBar
from lightning.pytorch.cli import SaveConfigCallback
from torch import nn
from torch_uncertainty.routines import ClassificationRoutine
from torch_uncertainty.utils.cli import TULightningCLI, TUSaveConfigCallback

from torch_uncertainty_signorm.cli import TUSigmaNormCLI, cli_main, main
from torch_uncertainty_signorm.cli.recipe_bases import composed_recipe

EXPERIMENTS = Path(__file__).parents[1] / "experiments"
RECIPES = sorted(EXPERIMENTS.glob("*.yaml"))
#: The CIFAR benchmark recipes (the digits quickstart follows its own CPU protocol; the
#: transformer recipes are checked in test_transformer_recipes_run.py).
BENCHMARK_RECIPES = [
    p for p in RECIPES if not p.stem.startswith(("digits", "vit_", "bert_", "tweets_"))
]
SYNTHETIC = f"{SyntheticDataModule.__module__}.SyntheticDataModule"
# Smallest width keeping the ResNet structure: stem 64 * 0.125 = 8 channels, stages 8/16/32/64.
NARROW = "--routine.init_args.model.init_args.width_multiplier=0.125"
CPU = ["--trainer.accelerator=cpu", "--trainer.devices=1", "--trainer.precision=32"]


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


@pytest.fixture(autouse=True)
def _clean_argv(monkeypatch):
    # LightningCLI warns when both `args` and sys.argv (here pytest's) are given.
    monkeypatch.setattr(sys, "argv", ["torch-uncertainty"])


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


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
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


# --- forwarding of eval_ood / eval_shift / num_tta ------------------------------------------

ROUTINE = "torch_uncertainty.routines.ClassificationRoutine"


def _args(routine: str = ROUTINE, **data_args) -> list[str]:
    args = [
        f"--routine={routine}",
        "--routine.init_args.model=torch.nn.Linear",
        "--routine.init_args.model.init_args.in_features=3",
        "--routine.init_args.model.init_args.out_features=10",
        f"--data={SYNTHETIC}",
        "--data.init_args.batch_size=4",
    ]
    if routine == ROUTINE:
        args.append("--routine.init_args.num_classes=10")
    return args + [f"--data.init_args.{k}={str(v).lower()}" for k, v in data_args.items()]


@pytest.mark.parametrize(
    ("eval_ood", "eval_shift", "num_tta"), [(True, False, 1), (False, True, 2), (True, True, 4)]
)
def test_datamodule_args_reach_the_routine(eval_ood, eval_shift, num_tta, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = _args(eval_ood=eval_ood, eval_shift=eval_shift, num_tta=num_tta)
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
    args = _args(eval_ood=True, eval_shift=True, num_tta=2)
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
    args = [*_args(eval_ood=False), "--routine.init_args.eval_ood=true"]
    with pytest.warns(
        UserWarning, match="eval_ood=True replaced by the datamodule's eval_ood=False"
    ):
        cli = cli_main(args, run=False)
    assert cli.routine.eval_ood is False


class PlainRoutine(LightningModule):
    """A routine taking none of the forwarded arguments."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model


class HParamsRoutine(ClassificationRoutine):
    """A routine saving its arguments, as Lightning's load_from_checkpoint needs."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.save_hyperparameters()


class GroupedRoutine(ClassificationRoutine):
    """Biases at 100x the learning rate and without weight decay, through the CLI's hook."""

    def optimizer_param_groups(self, lr: float):
        named = list(self.named_parameters())
        return [
            {"params": [p for n, p in named if not n.endswith("bias")]},
            {
                "params": [p for n, p in named if n.endswith("bias")],
                "lr": 100 * lr,
                "weight_decay": 0.0,
            },
        ]


def _path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def test_routines_without_those_arguments_are_left_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cli = cli_main(_args(routine=_path(PlainRoutine), eval_ood=True), run=False)
    assert isinstance(cli.routine, PlainRoutine)
    assert cli.forwarded_data_args == {}


def test_routine_hyperparameters_hold_the_routine_block(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = [
        *_args(routine=_path(HParamsRoutine), eval_ood=True),
        "--routine.init_args.num_classes=10",
    ]
    cli = cli_main(args, run=False)
    hparams = cli.routine.hparams
    assert hparams["_class_path"] == _path(HParamsRoutine)
    assert hparams["num_classes"] == 10
    assert hparams["eval_ood"] is True  # the forwarded value


def test_optimizer_param_groups_hook(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = [
        *_args(routine=_path(GroupedRoutine)),
        "--routine.init_args.num_classes=10",
        "--optimizer=torch.optim.SGD",
        "--optimizer.init_args.lr=0.05",
        "--optimizer.init_args.weight_decay=5e-4",
        "--lr_scheduler=torch.optim.lr_scheduler.MultiStepLR",
        "--lr_scheduler.init_args.milestones=[25, 50]",
    ]
    cli = cli_main(args, run=False)
    optimizers, schedulers = cli.routine.configure_optimizers()
    weights, biases = optimizers[0].param_groups
    assert (weights["lr"], weights["weight_decay"]) == (0.05, 5e-4)
    assert (biases["lr"], biases["weight_decay"]) == (pytest.approx(5.0), 0.0)
    assert [p.shape for p in biases["params"]] == [torch.Size([10])]
    assert schedulers[0].base_lrs == [0.05, pytest.approx(5.0)]
    assert "parameters" not in vars(cli.routine) and "configure_optimizers" not in vars(cli.routine)



class DecayGroupedRoutine(GroupedRoutine):
    """Records the base learning rate and weight decay the CLI hands its hook."""

    def optimizer_param_groups(self, lr: float, weight_decay: float):
        self.received = (lr, weight_decay)
        return super().optimizer_param_groups(lr)


class CountingSGD(torch.optim.SGD):
    built = 0

    def __init__(self, params, lr: float = 0.02, weight_decay: float = 1e-3) -> None:
        CountingSGD.built += 1
        super().__init__(params, lr=lr, weight_decay=weight_decay)


def test_optimizer_param_groups_get_the_blocks_defaults_from_one_optimizer(tmp_path, monkeypatch):
    """The base learning rate and weight decay are the `optimizer:` block's (its class's defaults
    when unset), read from the parsed block: the optimiser is built once."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(CountingSGD, "built", 0)
    args = [
        *_args(routine=_path(DecayGroupedRoutine)),
        "--routine.init_args.num_classes=10",
        f"--optimizer={_path(CountingSGD)}",
    ]
    cli = cli_main(args, run=False)
    assert cli.routine.received == (0.02, 1e-3)
    assert CountingSGD.built == 1
    weights, biases = cli.routine.configure_optimizers().param_groups
    assert (weights["lr"], weights["weight_decay"]) == (0.02, 1e-3)
    assert (biases["lr"], biases["weight_decay"]) == (pytest.approx(2.0), 0.0)

# --- running recipes ------------------------------------------------------------------------


def _run_recipe(recipe: str, *extra: str) -> TUSigmaNormCLI:
    return cli_main(
        [
            "fit",
            "--config",
            str(EXPERIMENTS / recipe),
            f"--data={SYNTHETIC}",
            "--data.init_args.batch_size=4",
            "--data.init_args.num_workers=0",
            NARROW,
            *CPU,
            *extra,
        ]
    )


@pytest.mark.slow
def test_baseline_recipe_fast_dev_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cli = _run_recipe("resnet18_c10_single.yaml", "--trainer.fast_dev_run=1")
    assert cli.trainer.state.finished
    assert cli.trainer.global_step == 1
    assert isinstance(cli.datamodule, SyntheticDataModule)
    assert cli.routine.model.linear.out_features == 10
    # Recipe values survive the overrides.
    optimizer = cli.trainer.optimizers[0]
    assert optimizer.defaults["lr"] == 0.05 and optimizer.defaults["weight_decay"] == 5e-4
    assert cli.config.fit.trainer.max_epochs == 75  # fast_dev_run itself runs one step
    assert any(isinstance(c, ProgressBar) for c in cli.trainer.callbacks)


@pytest.mark.slow
def test_eval_after_fit_tests_the_best_checkpoint_and_config_is_saved(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cli = _run_recipe(
        "resnet18_c10_packed.yaml",
        "--data.init_args.eval_ood=true",
        "--trainer.max_epochs=1",
        "--trainer.limit_train_batches=1",
        "--trainer.limit_val_batches=1",
        "--trainer.num_sanity_val_steps=0",
    )
    best = cli.trainer.checkpoint_callback.best_model_path
    assert best and Path(best).is_file()
    assert cli.trainer.state.fn == "test"  # fit, then test
    assert cli.trainer.ckpt_path == best
    metrics = cli.trainer.callback_metrics
    assert "test/cls/Acc" in metrics
    assert any(k.startswith("ood/") for k in metrics)  # eval_ood reached the routine

    saved = Path(cli.trainer.log_dir) / "config.yaml"
    assert saved.is_file()
    config = yaml.safe_load(saved.read_text())
    assert config["routine"]["class_path"] == ROUTINE
    assert config["data"]["class_path"] == SYNTHETIC
    assert config["routine"]["init_args"]["eval_ood"] is True
    assert saved.resolve().parents[2] == tmp_path.resolve() / "logs" / "resnet18_c10"


@pytest.mark.slow
def test_signorm_recipe_trains_scale_logits_in_their_own_group(tmp_path, monkeypatch):
    """The σN-Ens recipe runs, its optimizer built from the routine's parameter groups."""
    monkeypatch.chdir(tmp_path)
    cli = cli_main(
        [
            "fit",
            "--config",
            str(EXPERIMENTS / "resnet18_c10_signorm.yaml"),
            f"--data={SYNTHETIC}",
            "--data.init_args.batch_size=4",
            "--routine.init_args.model.init_args.model.init_args.width_multiplier=0.125",
            *CPU,
            "--trainer.fast_dev_run=1",
        ]
    )
    assert cli.trainer.state.finished and cli.trainer.global_step == 1
    scale_ids = {id(p) for p in cli.routine.model.scale_logits()}
    groups = cli.trainer.optimizers[0].param_groups
    scale_groups = [g for g in groups if {id(p) for p in g["params"]} == scale_ids]
    assert len(scale_groups) == 1
    assert scale_groups[0]["lr"] == pytest.approx(0.05 * 100)
    assert scale_groups[0]["weight_decay"] == 0.0
    others = [g for g in groups if g is not scale_groups[0]]
    assert all(g["lr"] == 0.05 and g["weight_decay"] == 5e-4 for g in others)
    every_other = {id(p) for p in cli.routine.parameters()} - scale_ids
    assert {id(p) for g in others for p in g["params"]} == every_other


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


@pytest.mark.slow
def test_checkpoints_reload_with_their_routine_block(tmp_path, monkeypatch):
    """Routines saving their hyperparameters reload from checkpoints written by the command."""
    monkeypatch.chdir(tmp_path)
    common = [
        "--config",
        str(EXPERIMENTS / "resnet18_c10_single.yaml"),
        "--eval_after_fit=false",
        f"--routine={_path(HParamsRoutine)}",
        f"--data={SYNTHETIC}",
        "--data.init_args.batch_size=4",
        "--data.init_args.num_workers=0",
        NARROW,
        *CPU,
    ]
    cli = cli_main(["fit", *common, "--trainer.max_epochs=1"])
    best = cli.trainer.checkpoint_callback.best_model_path
    assert cli.trainer.state.fn == "fit"  # eval_after_fit switched off

    routine = HParamsRoutine.load_from_checkpoint(best)
    assert routine.num_classes == 10
    assert routine.model.linear.out_features == 10
    tested = cli_main(["test", *common, "--ckpt_path", best])
    assert tested.trainer.ckpt_path == best
    assert "test/cls/Acc" in tested.trainer.callback_metrics


# --- --ckpt_path: the recipe names the classes, the checkpoint only fills unset values -------

SIGNORM_RECIPE = str(EXPERIMENTS / "resnet18_c10_signorm.yaml")
SIGNORM_ROUTINE = "torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine"
SIGNORM_NARROW = "--routine.init_args.model.init_args.model.init_args.width_multiplier=0.125"


def _signorm_args(*extra: str) -> list[str]:
    return [
        "--config", SIGNORM_RECIPE, f"--data={SYNTHETIC}", "--data.init_args.batch_size=4",
        "--data.init_args.num_workers=0", SIGNORM_NARROW, *CPU, *extra,
    ]


def _checkpoint(tmp_path: Path, hyper_parameters: dict) -> str:
    path = tmp_path / "crafted.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": hyper_parameters}, path)
    return str(path)


def test_checkpoint_routine_class_is_never_imported(tmp_path, monkeypatch):
    from fixtures.marker_module import assert_not_imported, marker_module

    monkeypatch.chdir(tmp_path)
    name, marker = marker_module(tmp_path, monkeypatch, "ckpt_routine_marker")
    ckpt = _checkpoint(tmp_path, {
        "_class_path": f"{name}.Evil", "_instantiator": "lightning.pytorch.cli.instantiate_module"
    })
    with pytest.raises(ValueError, match=rf"saved by the routine '{name}.Evil'.*'{ROUTINE}'"):
        cli_main(["test", *_args(), "--ckpt_path", ckpt])
    assert_not_imported(name, marker)


def test_checkpoint_model_class_is_never_imported(tmp_path, monkeypatch):
    from fixtures.marker_module import assert_not_imported, marker_module

    monkeypatch.chdir(tmp_path)
    name, marker = marker_module(tmp_path, monkeypatch, "ckpt_model_marker")
    ckpt = _checkpoint(tmp_path, {"_class_path": SIGNORM_ROUTINE,
                                  "model": {"class_path": f"{name}.Evil", "init_args": {}}})
    with pytest.raises(ValueError, match=r"model.class_path='ckpt_model_marker.Evil' where the "
                       r"recipe has 'torch_uncertainty_signorm.signorm_ensemble'"):
        cli_main(["test", *_signorm_args(), "--ckpt_path", ckpt])
    assert_not_imported(name, marker)


@pytest.mark.parametrize("command_line", [True, False], ids=["command_line", "recipe"])
def test_checkpoint_values_never_override_given_ones(command_line, tmp_path, monkeypatch):
    """M = 3 saved, 4 given explicitly (on the command line, or by the recipe alone)."""
    monkeypatch.chdir(tmp_path)
    ckpt = _checkpoint(tmp_path, {"_class_path": SIGNORM_ROUTINE, "model": {
        "class_path": "torch_uncertainty_signorm.signorm_ensemble",
        "init_args": {"num_estimators": 3}}})
    given = ["--routine.init_args.model.init_args.num_estimators=4"] if command_line else []
    with pytest.raises(ValueError, match=r"model.init_args.num_estimators=3, but the recipe or "
                       r"the command line sets 4"):
        cli_main(["test", *_signorm_args(*given), "--ckpt_path", ckpt])


def test_unset_values_come_from_the_checkpoint(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(TUSigmaNormCLI, "_run_subcommand", lambda self, subcommand: None)
    ckpt = _checkpoint(tmp_path, {
        "_class_path": "torch_uncertainty_signorm.routines.classification."
                       "SigmaNormClassificationRoutine",  # another name of the recipe's class
        "check_finite_loss": False,  # left at its default by the recipe
        "model": {"class_path": "torch_uncertainty_signorm.signorm_ensemble",
                  "init_args": {"num_estimators": 4, "scale_init_std": 0.5}},
    })
    cli = cli_main(["test", *_signorm_args(), "--ckpt_path", ckpt])
    assert cli.routine.check_finite_loss is False
    assert cli.config.test.routine.init_args.model.init_args.scale_init_std == 0.5
    assert cli.routine.model.num_estimators == 4


def test_recipe_inconsistency_fails_before_training(tmp_path, monkeypatch):
    """format_batch_fn repeating 2x for M = 4 fails when the routine is built, not in the loss."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"repeats the targets 2 times.*num_estimators=4"):
        cli_main(["fit", *_signorm_args(
            "--routine.init_args.format_batch_fn=torch_uncertainty.transforms.RepeatTarget",
            "--routine.init_args.format_batch_fn.init_args.num_repeats=2")])
    assert not (tmp_path / "logs").exists()  # no logger directory: nothing ran


@pytest.mark.slow
def test_signorm_checkpoint_reloads_and_tests_through_the_command(tmp_path, monkeypatch):
    """load_from_checkpoint rebuilds the fitted routine exactly; ``test --ckpt_path`` accepts
    the checkpoint with the recipe that wrote it."""
    from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine

    monkeypatch.chdir(tmp_path)
    common = _signorm_args("--eval_after_fit=false", "--trainer.limit_val_batches=1",
                           "--trainer.num_sanity_val_steps=0")
    cli = cli_main(["fit", *common, "--trainer.max_epochs=1", "--trainer.limit_train_batches=1"])
    best = cli.trainer.checkpoint_callback.best_model_path
    loaded = SigmaNormClassificationRoutine.load_from_checkpoint(best)
    inputs = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(loaded.eval()(inputs), cli.routine.eval()(inputs))
    assert loaded.model.num_estimators == 4 and loaded.scale_lr_multiplier == 100.0

    assert loaded.eval_ood is True  # forwarded from the recipe's datamodule when fitting

    # An evaluation overlay may switch the datamodule's loaders: the checkpoint does not decide.
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*replaced by the datamodule's")
        tested = cli_main(["test", *common, "--ckpt_path", best, "--trainer.limit_test_batches=1",
                           "--data.init_args.eval_ood=false"])
    assert tested.trainer.ckpt_path == best and tested.routine.eval_ood is False
    assert "test/div/jensen_gap" in tested.trainer.callback_metrics


def test_evaluation_arguments_given_with_a_checkpoint_are_used(tmp_path, monkeypatch):
    """``test --ckpt_path ... --routine.init_args.ood_criterion=entropy``: evaluation-only values
    do not change the trained model, so the given one wins; model values still must agree."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(TUSigmaNormCLI, "_run_subcommand", lambda self, subcommand: None)
    ckpt = _checkpoint(tmp_path, {"_class_path": SIGNORM_ROUTINE, "ood_criterion": "msp",
                                  "save_to_csv": True, "csv_filename": "results.csv"})
    cli = cli_main(["test", *_signorm_args("--routine.init_args.ood_criterion=entropy",
                                           "--routine.init_args.csv_filename=eval.csv"),
                    "--ckpt_path", ckpt])
    assert type(cli.routine.ood_criterion).__name__ == "EntropyCriterion"
    assert cli.routine.csv_filename == "eval.csv"
    assert cli.routine.save_to_csv is True  # the recipe's, equal to the checkpoint's


def test_signorm_recipes_take_members_from_the_model_alone(tmp_path, monkeypatch):
    """One path sets M: the routine's RepeatTarget and is_ensemble follow the model's."""
    monkeypatch.chdir(tmp_path)
    cli = cli_main(_signorm_args("--routine.init_args.model.init_args.num_estimators=2"),
                   run=False)
    assert cli.routine.model.num_estimators == 2
    assert cli.routine.format_batch_fn.num_repeats == 2 and cli.routine.is_ensemble is True


@pytest.mark.parametrize("form", ["yaml", "yaml_file", "class_name"])
def test_checkpoint_strings_read_as_classes_are_never_built(form, tmp_path, monkeypatch):
    """A checkpoint's ``format_batch_fn`` (left unset by every recipe, so taken from the
    checkpoint) given as a YAML class block, a YAML file or a class name is refused before
    jsonargparse reads it: nothing is imported, nothing built."""
    from fixtures.marker_module import assert_not_imported, marker_module

    monkeypatch.chdir(tmp_path)
    name, marker = marker_module(tmp_path, monkeypatch, "ckpt_string_marker")
    (tmp_path / "block.yaml").write_text(f"class_path: {name}.Evil\n")
    value = {"yaml": f"{{class_path: {name}.Evil}}", "yaml_file": "block.yaml",
             "class_name": "Identity"}[form]
    ckpt = _checkpoint(tmp_path, {"_class_path": SIGNORM_ROUTINE, "format_batch_fn": value})
    with pytest.raises(ValueError, match=r"routine\.init_args\.format_batch_fn=.* is a string "
                                         r"where a class is expected"):
        cli_main(["test", *_signorm_args(), "--ckpt_path", ckpt])
    assert_not_imported(name, marker)


def test_a_checkpoint_word_read_as_a_class_is_refused_after_parsing(tmp_path, monkeypatch):
    """``ood_criterion`` takes a criterion or a name: a checkpoint's plain word that the parser
    resolves to a class is refused before anything is built; a name is taken as before."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(TUSigmaNormCLI, "_run_subcommand", lambda self, subcommand: None)
    ckpt = _checkpoint(tmp_path, {"_class_path": SIGNORM_ROUTINE,
                                  "ood_criterion": "EntropyCriterion"})
    with pytest.raises(ValueError, match=r"ood_criterion was given as 'EntropyCriterion', which "
                                         r"the parser read as the class"):
        cli_main(["test", *_signorm_args(), "--ckpt_path", ckpt])
    ckpt = _checkpoint(tmp_path, {"_class_path": SIGNORM_ROUTINE, "ood_criterion": "entropy"})
    cli = cli_main(["test", *_signorm_args(), "--ckpt_path", ckpt])
    assert type(cli.routine.ood_criterion).__name__ == "EntropyCriterion"
    assert cli.config.test.weights_only is True  # how Lightning then loads the checkpoint


def test_an_empty_training_set_is_an_error_naming_the_datamodule(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"The training set of SyntheticDataModule is empty "
                                         r"\(0 samples\): there is nothing to fit"):
        cli_main(["fit", *_signorm_args("--data.init_args.num_samples=0",
                                        "--trainer.max_epochs=1")])


@pytest.mark.parametrize(("override", "message"), [
    ("--routine.init_args.target_diversity=1.5",
     "target_diversity must be a number in (0, 1), got 1.5."),
    ("--routine.init_args.model.init_args.member_spread=-1",
     "member_spread must be a finite number >= 0, got -1.0."),
])
def test_a_constructor_error_is_the_last_line_of_the_command(override, message, tmp_path,
                                                             monkeypatch, capsys):
    """jsonargparse reports a constructor's ValueError inside its Union report, which ends with
    the whole configuration; the command says the constructor's message last."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(["fit", "--config", str(EXPERIMENTS / "digits_signorm.yaml"), override])
    assert stop.value.code == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == f"torch-uncertainty: invalid configuration: ValueError: {message}"
