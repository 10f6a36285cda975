"""Optimizer parameter groups: σNorm scale logits train faster and without weight decay.

:func:`signorm_optim_recipe` turns any TorchUncertainty ``optim_recipe`` (a callable mapping a
model to its optimizer, or to ``{"optimizer": ..., "lr_scheduler": ...}``) into its σN-Ens
version; :mod:`torch_uncertainty_signorm.optim_recipes` holds those of TorchUncertainty's
recipes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn
from torch.optim import Optimizer

from ..members.heads import MemberHeads
from ..utils.checks import check_positive_number
from .layers import SigmaNorm

__all__ = [
    "ADAPTIVE_SCALE_LR_MULTIPLIER",
    "DEFAULT_SCALE_LR_MULTIPLIER",
    "build_on_groups",
    "is_adaptive",
    "recipe_optimizer",
    "scale_rate",
    "signorm_optim_recipe",
    "signorm_param_groups",
    "unwrap_signorm_recipe",
]

#: The attribute of a :func:`signorm_optim_recipe` holding ``(recipe, scale_lr_multiplier)``,
#: the recipe it wraps and the multiplier it was given, so that a routine can apply its own
#: multipliers to the wrapped recipe (or refuse a conflict) instead of inheriting them.
_WRAPPED = "signorm_wrapped_recipe"

#: Learning-rate multiplier of the σNorm scales under SGD-type optimisers (paper Appendix
#: "Implementation details"): it makes up for the scale logits' small gradients.
DEFAULT_SCALE_LR_MULTIPLIER = 100.0
#: The multiplier under adaptive optimisers (Adam, AdamW, RMSprop, ...), which already give
#: every parameter a step of about its learning rate whatever its gradient's size: there 100×
#: moves each scale logit ~100 times the rate a step, which on a converted pretrained CNN cost
#: 50 accuracy points within 160 steps; 3× kept it within 5 points of the backbone fine-tuned
#: alone, 10× cost 21 (docs/reliability.md).
ADAPTIVE_SCALE_LR_MULTIPLIER = 3.0

#: Optimisers that normalize each parameter's step by its own gradient statistics.
_ADAPTIVE = (torch.optim.Adagrad, torch.optim.Adadelta, torch.optim.RMSprop)


def is_adaptive(optimizer: Optimizer) -> bool:
    """Whether ``optimizer`` scales each parameter's step by its own gradient statistics (the
    Adam family, which has ``betas``, RMSprop, Adagrad, Adadelta)."""
    return "betas" in optimizer.defaults or isinstance(optimizer, _ADAPTIVE)


def scale_rate(scale_lr_multiplier: float | None, adaptive: bool = False) -> float:
    """The scale logits' learning-rate multiplier: ``scale_lr_multiplier`` when given, else
    :data:`ADAPTIVE_SCALE_LR_MULTIPLIER` for an adaptive optimiser and
    :data:`DEFAULT_SCALE_LR_MULTIPLIER` for another."""
    if scale_lr_multiplier is None:
        return ADAPTIVE_SCALE_LR_MULTIPLIER if adaptive else DEFAULT_SCALE_LR_MULTIPLIER
    return check_positive_number("scale_lr_multiplier", scale_lr_multiplier)


def signorm_param_groups(
    module: nn.Module,
    lr: float,
    scale_lr_multiplier: float | None = None,
    member_lr_multiplier: float = 1.0,
    weight_decay: float | None = None,
    *,
    adaptive: bool = False,
) -> list[dict]:
    """Optimizer groups: every parameter at ``lr``, and the σNorm scale logits at
    ``lr * scale_lr_multiplier`` with no weight decay.

    With ``member_lr_multiplier`` m ≠ 1, the parameters that belong to one member (the scale
    logits and the member heads' linear layers) train at m × their rate, and the heads' weight
    decay is divided by m, so that decay per step is unchanged. The loss averages over the M·B
    rows of M members, so each member's own parameters receive 1/M of the gradient that a single
    model's would: m = M gives them a single model's step (``SGD``'s update), while the shared
    backbone, which receives the mean of the members' gradients, keeps ``lr``.

    Args:
        module: Any module holding σNorm layers (an ensemble, or a routine wrapping one).
        lr: The base learning rate of the optimizer.
        scale_lr_multiplier: Learning-rate multiplier of the scale logits; ``None``:
            :func:`scale_rate` (:data:`DEFAULT_SCALE_LR_MULTIPLIER`, the paper's, or
            :data:`ADAPTIVE_SCALE_LR_MULTIPLIER` with ``adaptive``).
        member_lr_multiplier: Learning-rate multiplier of every per-member parameter.
        weight_decay: The optimizer's weight decay, divided by ``member_lr_multiplier`` for the
            member heads; ``None`` leaves their group at the optimizer's own value.
        adaptive: The groups are for an adaptive optimiser (:func:`is_adaptive`).

    Returns:
        Two groups (shared and heads, scale logits) when ``member_lr_multiplier`` is 1, else
        three (shared, member heads, scale logits).

    Raises:
        ValueError: If ``lr``, ``scale_lr_multiplier`` or ``member_lr_multiplier`` is no finite
            number > 0, ``weight_decay`` no finite number >= 0, or ``module`` holds no σNorm
            layer.

    Example:
        >>> optimizer = torch.optim.SGD(signorm_param_groups(model, lr=0.1), lr=0.1,
        ...                             momentum=0.9, weight_decay=5e-4)
    """
    lr = check_positive_number("lr", lr)
    scale_lr_multiplier = scale_rate(scale_lr_multiplier, adaptive)
    member = check_positive_number("member_lr_multiplier", member_lr_multiplier)
    if weight_decay is not None:
        weight_decay = check_positive_number("weight_decay", weight_decay, allow_zero=True)
    scale_logits = [m.scale_logits for m in module.modules() if isinstance(m, SigmaNorm)]
    if not scale_logits:
        raise ValueError(
            f"{type(module).__name__} holds no σNorm layer; build the model with "
            f"signorm_ensemble(...) first."
        )
    scale_ids = {id(p) for p in scale_logits}
    scales = {"params": scale_logits, "lr": lr * scale_lr_multiplier * member, "weight_decay": 0.0}
    if member == 1.0:
        return [{"params": [p for p in module.parameters() if id(p) not in scale_ids]}, scales]
    heads = [
        p
        for m in module.modules()
        if isinstance(m, MemberHeads)
        for p in m.parameters()
        if id(p) not in scale_ids
    ]
    member_ids = scale_ids | {id(p) for p in heads}
    shared = [p for p in module.parameters() if id(p) not in member_ids]
    head_group = {"params": heads, "lr": lr * member}
    if weight_decay is not None:
        head_group["weight_decay"] = weight_decay / member
    return [{"params": shared}, head_group, scales]


class _ParamGroups:
    """Stands in for a model in an ``optim_recipe``: its ``parameters()`` are the σN-Ens
    parameter groups, which torch optimizers take in place of a parameter list."""

    def __init__(self, groups: list[dict]) -> None:
        self.groups = groups

    def parameters(self) -> Iterator[dict]:
        return iter(self.groups)


def recipe_optimizer(procedure: Any, recipe: Callable) -> Optimizer:
    """The optimizer an ``optim_recipe`` returned (alone, or under ``"optimizer"``)."""
    optimizer = procedure.get("optimizer") if isinstance(procedure, dict) else procedure
    if not isinstance(optimizer, Optimizer):
        raise TypeError(
            f"optim_recipe {getattr(recipe, '__name__', recipe)!r} returned "
            f"{type(procedure).__name__}; expected a torch optimizer or a dict with one under "
            f"'optimizer', as TorchUncertainty's routines take."
        )
    return optimizer


def build_on_groups(
    optim_recipe: Callable[..., Any],
    model: nn.Module,
    groups_for: Callable[[float, float | None, bool], list[dict]],
    *args: Any,
    **kwargs: Any,
) -> Any:
    """What ``optim_recipe(model)`` returns, its optimizer built on ``groups_for(lr,
    weight_decay, adaptive)`` instead of ``model.parameters()``.

    The recipe is called twice: on ``model`` to read its learning rate, weight decay and kind
    (:func:`is_adaptive`), then on the groups, so that its scheduler scales every group.
    """
    optimizer = recipe_optimizer(optim_recipe(model, *args, **kwargs), optim_recipe)
    groups = groups_for(
        optimizer.defaults["lr"], optimizer.defaults.get("weight_decay"), is_adaptive(optimizer)
    )
    procedure = optim_recipe(_ParamGroups(groups), *args, **kwargs)
    recipe_optimizer(procedure, optim_recipe)
    return procedure


def unwrap_signorm_recipe(
    optim_recipe: Callable[..., Any],
) -> tuple[Callable[..., Any], float | None]:
    """``(the recipe a signorm_optim_recipe wraps, the multiplier it was given)``; any other
    recipe comes back as it is, with ``None``."""
    return getattr(optim_recipe, _WRAPPED, (optim_recipe, None))


def signorm_optim_recipe(
    optim_recipe: Callable[..., Any], scale_lr_multiplier: float | None = None
) -> Callable[..., Any]:
    """The σN-Ens version of a TorchUncertainty ``optim_recipe``.

    The returned callable takes the model (and the recipe's other arguments) and returns what
    ``optim_recipe`` returns, with the optimizer built on :func:`signorm_param_groups`: the
    σNorm scale logits at ``scale_lr_multiplier`` × the recipe's learning rate without weight
    decay, everything else as the recipe sets it. The recipe's scheduler is built on that
    optimizer, so it scales both groups. The recipe is called twice (the first time to read its
    learning rate); it must build its optimizer from ``model.parameters()``, as
    TorchUncertainty's recipes do.

    Given to :class:`~torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine`, the
    wrapped recipe is built on the routine's groups, so the routine's ``scale_lr_multiplier``
    and ``member_lr_multiplier`` act; a ``scale_lr_multiplier`` given here and a different one
    given to the routine is refused.

    Args:
        optim_recipe: A callable ``(model, ...) -> optimizer or {"optimizer": ...,
            "lr_scheduler": ...}``, e.g. ``torch_uncertainty.optim_recipes.optim_cifar10_resnet18``
            or ``lambda model: torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)``.
        scale_lr_multiplier: Learning-rate multiplier of the scale logits; ``None``:
            :func:`scale_rate` for the recipe's optimiser (:func:`is_adaptive`).

    Raises:
        ValueError: If ``scale_lr_multiplier`` is no finite number > 0 (at once), or the model
            holds no σNorm layer (when called).
        TypeError: If ``optim_recipe`` is not callable, or returns no optimizer.

    Example:
        >>> routine = SigmaNormClassificationRoutine(
        ...     model, optim_recipe=signorm_optim_recipe(optim_cifar10_resnet18))
    """
    if not callable(optim_recipe):
        raise TypeError(
            f"optim_recipe must be a callable taking the model (a TorchUncertainty optim "
            f"recipe), got {type(optim_recipe).__name__}."
        )
    if scale_lr_multiplier is not None:
        check_positive_number("scale_lr_multiplier", scale_lr_multiplier)

    @functools.wraps(optim_recipe)
    def recipe(model: nn.Module, *args: Any, **kwargs: Any) -> Any:
        return build_on_groups(
            optim_recipe,
            model,
            lambda lr, _decay, adaptive: signorm_param_groups(
                model, lr, scale_lr_multiplier, adaptive=adaptive
            ),
            *args,
            **kwargs,
        )

    setattr(recipe, _WRAPPED, (optim_recipe, scale_lr_multiplier))

    rate = (
        f"{DEFAULT_SCALE_LR_MULTIPLIER:g}x (SGD-type) or {ADAPTIVE_SCALE_LR_MULTIPLIER:g}x "
        f"(adaptive optimisers)"
        if scale_lr_multiplier is None
        else f"{scale_lr_multiplier:g}x"
    )
    recipe.__doc__ = (
        f"σN-Ens version of {getattr(optim_recipe, '__qualname__', 'a recipe')}"
        f" (:func:`~torch_uncertainty_signorm.signorm.optim.signorm_optim_recipe`): "
        f"the "
        f"σNorm scale logits at {rate} its learning rate, "
        f"without weight decay.\n\n" + (optim_recipe.__doc__ or "")
    )
    return recipe
