"""Optimizer parameter groups: σNorm scale logits train faster and without weight decay.

:func:`signorm_optim_recipe` turns any TorchUncertainty ``optim_recipe`` (a callable mapping a
model to its optimizer, or to ``{"optimizer": ..., "lr_scheduler": ...}``) into its σN-Ens
version, at the default rates (:func:`scale_rate`); :mod:`torch_uncertainty_signorm.optim_recipes`
holds those of TorchUncertainty's recipes. Given to
:class:`~torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine`, any recipe is built
on the routine's groups instead (:func:`build_on_groups`): the routine alone owns the
learning-rate multipliers.
"""

from __future__ import annotations

import functools
import inspect
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
    "MULTIPLIER_OWNER",
    "build_on_groups",
    "is_adaptive",
    "recipe_optimizer",
    "refuse_scale_lr_multiplier",
    "scale_rate",
    "signorm_optim_recipe",
    "signorm_param_groups",
    "wrapped_recipe",
]

#: The attribute of a :func:`signorm_optim_recipe` holding the recipe it wraps, which a routine
#: builds on its own groups (:func:`wrapped_recipe`).
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


def _name(recipe: Callable) -> str:
    return getattr(recipe, "__qualname__", type(recipe).__name__)


def recipe_optimizer(procedure: Any, recipe: Callable) -> Optimizer:
    """The optimizer an ``optim_recipe`` returned (alone, or under ``"optimizer"``)."""
    optimizer = procedure.get("optimizer") if isinstance(procedure, dict) else procedure
    if not isinstance(optimizer, Optimizer):
        raise TypeError(
            f"optim_recipe {_name(recipe)!r} returned "
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

    The recipe is called twice: on ``model``, to read its optimizer's learning rate, weight
    decay and kind (:func:`is_adaptive`), which the groups depend on; then on the groups, so
    that its scheduler is built on them and scales every group. It must build its optimizer
    from ``model.parameters()``, as TorchUncertainty's recipes do: the groups are built here.

    Raises:
        TypeError: If the recipe returns no optimizer.
        ValueError: If its optimizer does not hold ``model.parameters()`` as one group (the
            recipe builds groups of its own), naming the recipe.
    """
    optimizer = recipe_optimizer(optim_recipe(model, *args, **kwargs), optim_recipe)
    given = [{id(p) for p in group["params"]} for group in optimizer.param_groups]
    expected = {id(p) for p in model.parameters()}
    if len(given) != 1 or given[0] != expected:
        raise ValueError(
            f"optim_recipe {_name(optim_recipe)!r} builds its optimizer on {len(given)} "
            f"parameter group(s) of its own, holding {len(set().union(*given) & expected)} of "
            f"the model's {len(expected)} parameters; σN-Ens builds the groups (the σNorm "
            f"scale logits apart, at the routine's scale_lr_multiplier and "
            f"member_lr_multiplier): build the optimizer on model.parameters(), e.g. "
            f"lambda model: torch.optim.SGD(model.parameters(), lr=0.05)."
        )
    groups = groups_for(
        optimizer.defaults["lr"], optimizer.defaults.get("weight_decay"), is_adaptive(optimizer)
    )
    procedure = optim_recipe(_ParamGroups(groups), *args, **kwargs)
    recipe_optimizer(procedure, optim_recipe)
    return procedure


def wrapped_recipe(optim_recipe: Callable[..., Any]) -> Callable[..., Any]:
    """The recipe a :func:`signorm_optim_recipe` wraps; any other recipe as it is."""
    return getattr(optim_recipe, _WRAPPED, optim_recipe)


#: Where the scale logits' multiplier is set since 0.2.0 (``signorm_optim_recipe`` and
#: ``get_procedure`` took it in 0.1.0).
MULTIPLIER_OWNER = (
    "the routine owns it since 0.2.0: SigmaNormClassificationRoutine(..., "
    "scale_lr_multiplier=...) (recipe key routine.init_args.scale_lr_multiplier); in a "
    "training loop of your own, torch.optim.SGD(signorm_param_groups(model, lr, "
    "scale_lr_multiplier), lr=lr)"
)


def refuse_scale_lr_multiplier(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function``, refusing the ``scale_lr_multiplier`` it took in 0.1.0 (by keyword, or as
    the positional argument after its own) with a ``TypeError`` saying where it is set now
    (:data:`MULTIPLIER_OWNER`)."""
    positional = sum(
        p.kind is p.POSITIONAL_OR_KEYWORD for p in inspect.signature(function).parameters.values()
    )

    @functools.wraps(function)
    def refusing(*args: Any, **kwargs: Any) -> Any:
        if "scale_lr_multiplier" in kwargs or len(args) > positional:
            raise TypeError(
                f"{function.__name__}() takes no scale_lr_multiplier: {MULTIPLIER_OWNER}."
            )
        return function(*args, **kwargs)

    return refusing


@refuse_scale_lr_multiplier
def signorm_optim_recipe(optim_recipe: Callable[..., Any]) -> Callable[..., Any]:
    """The σN-Ens version of a TorchUncertainty ``optim_recipe``.

    The returned callable takes the model (and the recipe's other arguments) and returns what
    ``optim_recipe`` returns, with the optimizer built on :func:`signorm_param_groups`: the
    σNorm scale logits at :func:`scale_rate` × the recipe's learning rate (100× under SGD-type
    optimisers, 3× under adaptive ones) without weight decay, everything else as the recipe
    sets it. The recipe's scheduler is built on that optimizer, so it scales both groups. The
    recipe is called twice (:func:`build_on_groups`); it must build its optimizer from
    ``model.parameters()``, as TorchUncertainty's recipes do.

    Given to :class:`~torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine`, the
    recipe it wraps is built on the routine's groups instead: the routine alone sets the
    rates (``scale_lr_multiplier``, ``member_lr_multiplier``).

    Args:
        optim_recipe: A callable ``(model, ...) -> optimizer or {"optimizer": ...,
            "lr_scheduler": ...}``, e.g. ``torch_uncertainty.optim_recipes.optim_cifar10_resnet18``
            or ``lambda model: torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)``.

    Raises:
        TypeError: If ``optim_recipe`` is not callable, a ``scale_lr_multiplier`` is given (the
            routine's since 0.2.0), or the recipe returns no optimizer (when called).
        ValueError: If the model holds no σNorm layer, or the recipe builds parameter groups of
            its own (when called).

    Example:
        >>> optimizer = signorm_optim_recipe(
        ...     lambda m: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9))(model)
    """
    if not callable(optim_recipe):
        raise TypeError(
            f"optim_recipe must be a callable taking the model (a TorchUncertainty optim "
            f"recipe), got {type(optim_recipe).__name__}."
        )

    @functools.wraps(optim_recipe)
    def recipe(model: nn.Module, *args: Any, **kwargs: Any) -> Any:
        return build_on_groups(
            optim_recipe,
            model,
            lambda lr, _decay, adaptive: signorm_param_groups(model, lr, adaptive=adaptive),
            *args,
            **kwargs,
        )

    setattr(recipe, _WRAPPED, optim_recipe)
    recipe.__doc__ = (
        f"σN-Ens version of {getattr(optim_recipe, '__qualname__', 'a recipe')}"
        f" (:func:`~torch_uncertainty_signorm.signorm.optim.signorm_optim_recipe`): the σNorm "
        f"scale logits at {DEFAULT_SCALE_LR_MULTIPLIER:g}x (SGD-type) or "
        f"{ADAPTIVE_SCALE_LR_MULTIPLIER:g}x (adaptive optimisers) its learning rate, without "
        f"weight decay.\n\n" + (optim_recipe.__doc__ or "")
    )
    return recipe
