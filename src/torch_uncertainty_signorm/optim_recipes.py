"""σN-Ens versions of TorchUncertainty's optimisation recipes (its ``optim_recipes`` module), and
the step-based warm-up and cosine schedule of the transformer recipes (:class:`WarmupCosineLR`).

Each function has the name and arguments of TorchUncertainty's and returns the same optimizer
and scheduler, the σNorm scale logits in their own group at 100× the learning rate (3× under
an adaptive optimiser) without weight decay
(:func:`~torch_uncertainty_signorm.signorm.optim.signorm_optim_recipe`). Pass one as the
routine's ``optim_recipe``, as with TorchUncertainty; the routine's ``scale_lr_multiplier`` and
``member_lr_multiplier`` then set the groups' rates (the routine alone owns them)::

    from torch_uncertainty_signorm.optim_recipes import optim_cifar10_resnet18

    routine = SigmaNormClassificationRoutine(model, optim_recipe=optim_cifar10_resnet18)

:func:`get_procedure` is TorchUncertainty's lookup by architecture and data set.
"""

from __future__ import annotations

from collections.abc import Callable

from torch.optim import Optimizer
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR
from torch_uncertainty import optim_recipes as _tu

from .signorm.optim import refuse_scale_lr_multiplier, signorm_optim_recipe
from .utils.checks import check_integer

__all__ = [
    "WarmupCosineLR",
    "get_procedure",
    "optim_abnn",
    "optim_cifar10_resnet18",
    "optim_cifar10_resnet34",
    "optim_cifar10_resnet50",
    "optim_cifar10_vgg16",
    "optim_cifar10_wideresnet",
    "optim_cifar100_resnet18",
    "optim_cifar100_resnet34",
    "optim_cifar100_resnet50",
    "optim_cifar100_vgg16",
    "optim_imagenet_resnet50",
    "optim_imagenet_resnet50_a3",
    "optim_tinyimagenet_resnet34",
    "optim_tinyimagenet_resnet50",
]

optim_abnn = signorm_optim_recipe(_tu.optim_abnn)
optim_cifar10_resnet18 = signorm_optim_recipe(_tu.optim_cifar10_resnet18)
optim_cifar10_resnet34 = signorm_optim_recipe(_tu.optim_cifar10_resnet34)
optim_cifar10_resnet50 = signorm_optim_recipe(_tu.optim_cifar10_resnet50)
optim_cifar10_vgg16 = signorm_optim_recipe(_tu.optim_cifar10_vgg16)
optim_cifar10_wideresnet = signorm_optim_recipe(_tu.optim_cifar10_wideresnet)
optim_cifar100_resnet18 = signorm_optim_recipe(_tu.optim_cifar100_resnet18)
optim_cifar100_resnet34 = signorm_optim_recipe(_tu.optim_cifar100_resnet34)
optim_cifar100_resnet50 = signorm_optim_recipe(_tu.optim_cifar100_resnet50)
optim_cifar100_vgg16 = signorm_optim_recipe(_tu.optim_cifar100_vgg16)
optim_imagenet_resnet50 = signorm_optim_recipe(_tu.optim_imagenet_resnet50)
optim_imagenet_resnet50_a3 = signorm_optim_recipe(_tu.optim_imagenet_resnet50_a3)
optim_tinyimagenet_resnet34 = signorm_optim_recipe(_tu.optim_tinyimagenet_resnet34)
optim_tinyimagenet_resnet50 = signorm_optim_recipe(_tu.optim_tinyimagenet_resnet50)


@refuse_scale_lr_multiplier
def get_procedure(arch_name: str, ds_name: str, imagenet_recipe: str | None = None) -> Callable:
    """The σN-Ens version of TorchUncertainty's recipe for ``arch_name`` (``resnet18``,
    ``resnet50``, ``wideresnet28x10`` ...) on ``ds_name`` (``cifar10``, ``cifar100``,
    ``tiny-imagenet``, ``imagenet``), as ``torch_uncertainty.optim_recipes.get_procedure``
    (:func:`~torch_uncertainty_signorm.signorm.optim.signorm_optim_recipe`: the scale logits'
    rate is the routine's ``scale_lr_multiplier``, else
    :func:`~torch_uncertainty_signorm.signorm.optim.scale_rate`).

    Raises:
        NotImplementedError: If TorchUncertainty has no recipe for them (its message).
        TypeError: If given a ``scale_lr_multiplier`` (the routine's since 0.2.0).
    """
    return signorm_optim_recipe(
        _tu.get_procedure(arch_name, ds_name, imagenet_recipe=imagenet_recipe)
    )


class WarmupCosineLR(SequentialLR):
    r"""Linear warm-up over ``warmup_steps``, then cosine decay to ``eta_min`` at ``total_steps``.

    Built from torch's :class:`~torch.optim.lr_scheduler.LinearLR` and
    :class:`~torch.optim.lr_scheduler.CosineAnnealingLR`. After warm-up, at step
    :math:`t`,

    .. math::
        \eta_t = \eta_{\min} + \tfrac12 (\eta - \eta_{\min})
        \left(1 + \cos\frac{\pi (t - t_w)}{T - t_w}\right).

    It is stepped once per optimisation step, not per epoch: the ``torch-uncertainty``
    command reads :attr:`interval` and tells Lightning so (a recipe's ``lr_scheduler:``
    block is otherwise stepped once per epoch).

    Args:
        optimizer: The optimiser; every parameter group is scheduled.
        total_steps: Length :math:`T` of the schedule in optimisation steps (the
            trainer's ``max_steps``).
        warmup_steps: Warm-up steps :math:`t_w`; ``0`` starts the cosine at once.
        warmup_start_factor: Learning-rate factor of the first warm-up step; it grows
            linearly to 1 at ``warmup_steps``.
        eta_min: Final learning rate.

    Raises:
        ValueError: If the steps are not integers with ``0 <= warmup_steps < total_steps``
            or ``warmup_start_factor`` is not in ``(0, 1]``.
    """

    #: How often Lightning steps this scheduler (read by the ``torch-uncertainty`` command).
    interval = "step"

    def __init__(
        self,
        optimizer: Optimizer,
        total_steps: int,
        warmup_steps: int = 0,
        warmup_start_factor: float = 1e-3,
        eta_min: float = 0.0,
    ) -> None:
        check_integer("total_steps", total_steps, low=0)
        check_integer("warmup_steps", warmup_steps, low=0)
        if warmup_steps >= total_steps:
            raise ValueError(
                f"warmup_steps={warmup_steps} must be smaller than total_steps={total_steps}."
            )
        if not 0 < warmup_start_factor <= 1:
            raise ValueError(f"warmup_start_factor must be in (0, 1], got {warmup_start_factor!r}.")
        cosine = CosineAnnealingLR(optimizer, T_max=total_steps - warmup_steps, eta_min=eta_min)
        if warmup_steps == 0:
            super().__init__(optimizer, schedulers=[cosine], milestones=[])
        else:
            warmup = LinearLR(optimizer, start_factor=warmup_start_factor, total_iters=warmup_steps)
            super().__init__(optimizer, schedulers=[warmup, cosine], milestones=[warmup_steps])
