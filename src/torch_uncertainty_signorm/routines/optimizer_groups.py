"""A check of the optimiser the user built: the σNorm scale logits need a group of their own."""

from __future__ import annotations

from lightning.pytorch.utilities import rank_zero_warn
from torch.optim import Optimizer

from ..signorm.ensemble import SigmaNormEnsemble

__all__ = ["warn_shared_scale_group"]


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
                    "Pass a σN-Ens optim_recipe: one of torch_uncertainty_signorm."
                    "optim_recipes (e.g. optim_cifar10_resnet18), or your own wrapped in "
                    "torch_uncertainty_signorm.signorm.optim.signorm_optim_recipe (the "
                    "torch-uncertainty command does this for the YAML `optimizer:`)."
                )
                return
