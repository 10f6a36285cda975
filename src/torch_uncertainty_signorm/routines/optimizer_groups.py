"""The routine's optimizer, whatever built it: its learning-rate multipliers apply to the
``optim_recipe`` given in Python (TorchUncertainty's, a σN-Ens one, a user's own), or a
conflicting second value is refused; and a check that the scale logits have a group of their own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from lightning.pytorch.utilities import rank_zero_warn
from torch import nn
from torch.optim import Optimizer

from ..signorm.ensemble import SigmaNormEnsemble
from ..signorm.optim import (
    build_on_groups,
    is_adaptive,
    recipe_optimizer,
    scale_rate,
    signorm_param_groups,
    unwrap_signorm_recipe,
)

__all__ = ["check_optimizer_rates", "routine_optimizer", "warn_shared_scale_group"]


def _scale_group(model: SigmaNormEnsemble, optimizer: Optimizer) -> dict | None:
    """The optimizer group holding the σNorm scale logits, ``None`` when they share one."""
    scale_ids = {id(p) for p in model.scale_logits()}
    for group in optimizer.param_groups:
        ids = {id(p) for p in group["params"]}
        if ids & scale_ids:
            return group if ids <= scale_ids else None
    return None


def check_optimizer_rates(
    model: SigmaNormEnsemble,
    optimizer: Optimizer,
    scale_lr_multiplier: float | None,
    member_lr_multiplier: float,
    source: str,
) -> None:
    """Refuse an optimizer built elsewhere (``source``) that drops the multipliers the routine
    was given: the scale logits in a shared group, or at another rate than
    ``scale_lr_multiplier × member_lr_multiplier`` × its learning rate. Multipliers left at
    their defaults leave the optimizer's rates as they are."""
    if scale_lr_multiplier is None and member_lr_multiplier == 1.0:
        return
    given = (
        f"scale_lr_multiplier={scale_lr_multiplier!r}, "
        f"member_lr_multiplier={member_lr_multiplier!r}"
    )
    group = _scale_group(model, optimizer)
    if group is None:
        raise ValueError(
            f"The routine's {given} would be dropped: {source} trains the σNorm scale logits "
            f"in one group with other parameters. Give the routine a recipe building its "
            f"optimizer on model.parameters() (the routine then builds the groups), or leave "
            f"the multipliers unset."
        )
    expected = scale_rate(scale_lr_multiplier, is_adaptive(optimizer)) * member_lr_multiplier
    ratio = group["lr"] / optimizer.defaults["lr"]
    if not math.isclose(ratio, expected, rel_tol=1e-6):
        raise ValueError(
            f"The routine's {given} (scale logits at {expected:g}x the learning rate) and "
            f"{source} (scale logits at {ratio:g}x) disagree: give the rate in one place."
        )


def routine_optimizer(routine: Any, optim_recipe: Any) -> Any:
    """What the routine's ``configure_optimizers`` returns for ``optim_recipe``, as
    TorchUncertainty's ``optim_recipe`` attribute: the recipe called on the model, its optimizer
    built on the routine's :meth:`optimizer_param_groups` so that ``scale_lr_multiplier`` and
    ``member_lr_multiplier`` act.

    A :func:`~torch_uncertainty_signorm.signorm.optim.signorm_optim_recipe` gives its own
    ``scale_lr_multiplier`` only when the routine has none (two different values are refused);
    a recipe or optimizer that builds the groups itself is kept when its rates agree with the
    routine's (:func:`check_optimizer_rates`).
    """
    model = routine.model
    scale, member = routine.scale_lr_multiplier, routine.member_lr_multiplier
    if optim_recipe is None:
        return None
    if not callable(optim_recipe):
        check_optimizer_rates(
            model,
            recipe_optimizer(optim_recipe, optim_recipe),
            scale,
            member,
            "the optim_recipe's optimizer",
        )
        return optim_recipe
    recipe, wrapped_scale = unwrap_signorm_recipe(optim_recipe)
    if recipe is not optim_recipe:
        if scale is not None and wrapped_scale is not None and scale != wrapped_scale:
            raise ValueError(
                f"scale_lr_multiplier is given twice: {scale:g} to the routine and "
                f"{wrapped_scale:g} to signorm_optim_recipe({_name(recipe)}): give it once."
            )
        scale = scale if scale is not None else wrapped_scale
    else:
        built = recipe(model)
        optimizer = recipe_optimizer(built, recipe)
        if _scale_group(model, optimizer) is not None:  # the recipe built the groups itself
            check_optimizer_rates(model, optimizer, scale, member, f"optim_recipe {_name(recipe)}")
            return built
    return build_on_groups(recipe, model, _groups(model, scale, member))


def _groups(
    model: nn.Module, scale: float | None, member: float
) -> Callable[[float, float | None, bool], list[dict]]:
    return lambda lr, decay, adaptive: signorm_param_groups(
        model, lr, scale, member, decay, adaptive=adaptive
    )


def _name(recipe: Callable) -> str:
    return getattr(recipe, "__qualname__", type(recipe).__name__)


def warn_shared_scale_group(model: SigmaNormEnsemble, optimizers: list[Optimizer]) -> None:
    """Warn when the σNorm scale logits share an optimizer group with other parameters: they
    then train without their learning-rate multiplier."""
    scale_ids = {id(p) for p in model.scale_logits()}
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            if any(id(p) in scale_ids for p in group["params"]) and any(
                id(p) not in scale_ids for p in group["params"]
            ):
                rank_zero_warn(
                    "The σNorm scale logits share an optimizer group with the other "
                    "parameters, so they train without their learning-rate multiplier. "
                    "Give the routine its optim_recipe when building it (a callable such as "
                    "torch_uncertainty_signorm.optim_recipes.optim_cifar10_resnet18 or "
                    "lambda m: torch.optim.SGD(m.parameters(), lr=0.05)): it builds the "
                    "recipe on its groups, as the torch-uncertainty command does for the YAML "
                    "`optimizer:`; an optimizer set afterwards keeps its own groups."
                )
                return
