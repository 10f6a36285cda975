"""σN-Ens versions of TorchUncertainty's optimisation recipes (its ``optim_recipes`` module).

Each function has the name and arguments of TorchUncertainty's and returns the same optimizer
and scheduler, the σNorm scale logits in their own group at 100× the learning rate (3× under
an adaptive optimiser) without weight decay
(:func:`~torch_uncertainty_signorm.signorm.optim.signorm_optim_recipe`). Pass one as the
routine's ``optim_recipe``, as with TorchUncertainty; the routine's ``scale_lr_multiplier`` and
``member_lr_multiplier`` then set the groups' rates::

    from torch_uncertainty_signorm.optim_recipes import optim_cifar10_resnet18

    routine = SigmaNormClassificationRoutine(model, optim_recipe=optim_cifar10_resnet18)

:func:`get_procedure` is TorchUncertainty's lookup by architecture and data set; its
``scale_lr_multiplier`` defaults to 100 whatever the recipe's optimiser.
"""

from __future__ import annotations

from collections.abc import Callable

from torch_uncertainty import optim_recipes as _tu

from .signorm.optim import signorm_optim_recipe

__all__ = [
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


def get_procedure(
    arch_name: str,
    ds_name: str,
    imagenet_recipe: str | None = None,
    scale_lr_multiplier: float | None = None,
) -> Callable:
    """The σN-Ens version of TorchUncertainty's recipe for ``arch_name`` (``resnet18``,
    ``resnet50``, ``wideresnet28x10`` ...) on ``ds_name`` (``cifar10``, ``cifar100``,
    ``tiny-imagenet``, ``imagenet``), as ``torch_uncertainty.optim_recipes.get_procedure``;
    ``scale_lr_multiplier`` ``None`` (default) leaves the rate to the routine's multiplier, else
    :func:`~torch_uncertainty_signorm.signorm.optim.scale_rate`.

    Raises:
        NotImplementedError: If TorchUncertainty has no recipe for them (its message).
    """
    return signorm_optim_recipe(
        _tu.get_procedure(arch_name, ds_name, imagenet_recipe=imagenet_recipe),
        scale_lr_multiplier,
    )
