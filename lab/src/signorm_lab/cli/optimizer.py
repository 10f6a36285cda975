"""The recipe's ``optimizer:`` / ``lr_scheduler:`` blocks built on the routine's parameter groups
(:func:`routine_optim_recipe`), stepped per step or per epoch (:func:`optim_recipe`)."""

from __future__ import annotations

import inspect
from typing import Any

import torch
from jsonargparse import Namespace
from lightning.pytorch import LightningModule
from lightning.pytorch.cli import LightningCLI, LRSchedulerCallable, OptimizerCallable

from torch_uncertainty_signorm.signorm.optim import is_adaptive

__all__ = ["base_hyperparameters", "optim_recipe", "routine_optim_recipe"]


def base_hyperparameters(
    block: Namespace | None, optimizer: OptimizerCallable, parameters: list[Any]
) -> dict[str, Any]:
    """The base ``lr`` and ``weight_decay`` of the recipe's optimiser.

    Read from the parsed ``optimizer:`` block's ``init_args``, which jsonargparse fills with the
    constructor's defaults (the values the optimiser is built with: torch's optimisers keep them
    as their ``defaults``). An optimiser whose constructor takes no ``lr`` argument is built once
    on ``parameters`` to read its ``defaults``.
    """
    init_args = block.get("init_args") if isinstance(block, Namespace) else None
    if isinstance(init_args, Namespace) and "lr" in init_args:
        return {"lr": init_args["lr"], "weight_decay": init_args.get("weight_decay")}
    defaults = optimizer(parameters).defaults
    return {"lr": defaults["lr"], "weight_decay": defaults.get("weight_decay")}


def optim_recipe(
    lightning_module: LightningModule | None, optimizer: Any, lr_scheduler: Any = None
) -> Any:
    """As Lightning's ``configure_optimizers``; a scheduler declaring ``interval = "step"`` (such
    as :class:`~torch_uncertainty_signorm.optim_recipes.WarmupCosineLR`) is stepped every
    optimisation step instead of every epoch."""
    if getattr(lr_scheduler, "interval", None) == "step":
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": lr_scheduler, "interval": "step"},
        }
    return LightningCLI.configure_optimizers(lightning_module, optimizer, lr_scheduler)


def routine_optim_recipe(
    routine: LightningModule,
    optimizer: OptimizerCallable,
    lr_scheduler: LRSchedulerCallable | None,
    block: Namespace | None = None,
) -> Any:
    """The recipe's optimiser and scheduler, built for ``routine``.

    The optimiser is built on the routine's ``optimizer_param_groups(lr)`` when it defines one
    (torch param-group dicts for the base learning rate ``lr``, the ``optimizer:`` block's, its
    ``weight_decay`` and whether it is ``adaptive`` (Adam, RMSprop, ...) when the method takes
    those arguments; see
    :func:`base_hyperparameters`), else on ``routine.parameters()``; the ``lr_scheduler:`` is
    built on it, so the schedule scales every group.

    Args:
        routine: The routine (it must take TorchUncertainty's ``optim_recipe``).
        optimizer: The ``optimizer:`` block, as Lightning's ``OptimizerCallable``.
        lr_scheduler: The ``lr_scheduler:`` block, as Lightning's ``LRSchedulerCallable``.
        block: The parsed ``optimizer:`` block (``class_path``/``init_args``).

    Returns:
        What the routine's ``configure_optimizers`` is to return (:func:`optim_recipe`).
    """
    if not hasattr(routine, "optim_recipe"):
        raise ValueError(
            f"The recipe has an `optimizer:` block, but the routine "
            f"{type(routine).__name__} takes no `optim_recipe` (TorchUncertainty's "
            f"routines do): remove the block, or configure the optimiser in the routine."
        )
    groups = getattr(routine, "optimizer_param_groups", None)
    parameters = list(routine.parameters())
    if callable(groups):
        base = base_hyperparameters(block, optimizer, parameters)
        extra = {}
        accepted = inspect.signature(groups).parameters
        if "weight_decay" in accepted:
            extra["weight_decay"] = base["weight_decay"]
        if "adaptive" in accepted:  # the σNorm scale rate depends on the optimiser's kind
            extra["adaptive"] = is_adaptive(optimizer([torch.nn.Parameter(torch.zeros(1))]))
        parameters = [dict(group) for group in groups(base["lr"], **extra)]
    built = optimizer(parameters)
    return optim_recipe(routine, built, None if lr_scheduler is None else lr_scheduler(built))
