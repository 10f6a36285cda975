"""The optimizer: block and a routine's optimizer_param_groups hook."""

from __future__ import annotations

import pytest
import torch
from command_args import class_path_of, routine_args, signorm_args
from torch_uncertainty.routines import ClassificationRoutine

from signorm_lab.cli import cli_main
from torch_uncertainty_signorm import optim_recipes
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine


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


def test_optimizer_param_groups_hook(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = [
        *routine_args(routine=class_path_of(GroupedRoutine)),
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
        *routine_args(routine=class_path_of(DecayGroupedRoutine)),
        "--routine.init_args.num_classes=10",
        f"--optimizer={class_path_of(CountingSGD)}",
    ]
    cli = cli_main(args, run=False)
    assert cli.routine.received == (0.02, 1e-3)
    assert CountingSGD.built == 1
    weights, biases = cli.routine.configure_optimizers().param_groups
    assert (weights["lr"], weights["weight_decay"]) == (0.02, 1e-3)
    assert (biases["lr"], biases["weight_decay"]) == (pytest.approx(2.0), 0.0)


def test_the_commands_optimizer_trains_at_the_routines_multipliers(tmp_path, monkeypatch):
    """The command's route: the `optimizer:` block (lr 0.05) built on the routine's groups."""
    monkeypatch.chdir(tmp_path)
    cli = cli_main(
        signorm_args(
            "--routine.init_args.scale_lr_multiplier=7",
            "--routine.init_args.member_lr_multiplier=4",
        ),
        run=False,
    )
    optimizers, schedulers = cli.routine.configure_optimizers()
    assert [g["lr"] for g in optimizers[0].param_groups] == pytest.approx([0.05, 0.2, 1.4])
    assert schedulers[0].base_lrs == pytest.approx([0.05, 0.2, 1.4])


class RecipeRoutine(SigmaNormClassificationRoutine):
    """A routine holding an optim_recipe of its own, as one built in Python does."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs, optim_recipe=optim_recipes.optim_cifar10_resnet18)


def test_an_optimizer_block_and_a_routines_own_recipe_are_refused_naming_both(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        ValueError,
        match=r"The optimiser is given twice: the routine's "
        r"optim_recipe \(a SGD\) and the recipe's `optimizer:` block "
        r"\(torch.optim.SGD\): keep one",
    ):
        cli_main(signorm_args(f"--routine={class_path_of(RecipeRoutine)}"), run=False)
