"""The routine's optimizer: any ``optim_recipe`` built on the routine's parameter groups, whose
learning-rate multipliers the routine alone owns; and a warning when an optimizer set afterwards
trains the scale logits in a shared group.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch.utilities import rank_zero_warn
from torch.optim import Optimizer

from ..signorm.ensemble import SigmaNormEnsemble
from ..signorm.optim import build_on_groups, wrapped_recipe

__all__ = ["routine_optimizer", "warn_shared_scale_group"]


def routine_optimizer(routine: Any, optim_recipe: Any) -> Any:
    """What the routine's ``configure_optimizers`` returns for ``optim_recipe``, as
    TorchUncertainty's ``optim_recipe`` attribute: the recipe (TorchUncertainty's, a σN-Ens one,
    a user's own; a :func:`~torch_uncertainty_signorm.signorm.optim.signorm_optim_recipe` is
    unwrapped) with its optimizer built on the routine's :meth:`optimizer_param_groups`, so that
    ``scale_lr_multiplier`` and ``member_lr_multiplier`` act. The recipe is called twice
    (:func:`~torch_uncertainty_signorm.signorm.optim.build_on_groups`).

    Raises:
        TypeError: If ``optim_recipe`` is a built optimizer (or a mapping holding one): it
            cannot be rebuilt on the routine's groups.
        ValueError: If the recipe builds parameter groups of its own.
    """
    if optim_recipe is None:
        return None
    if not callable(optim_recipe):
        given = optim_recipe.get("optimizer") if isinstance(optim_recipe, dict) else optim_recipe
        raise TypeError(
            f"optim_recipe is a built {type(given).__name__}, which cannot take the routine's "
            f"parameter groups (the σNorm scale logits at scale_lr_multiplier): give the "
            f"callable that builds it, e.g. optim_recipe=lambda model: "
            f"torch.optim.SGD(model.parameters(), lr=0.05)."
        )
    return build_on_groups(
        wrapped_recipe(optim_recipe), routine.model, routine.optimizer_param_groups
    )


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
