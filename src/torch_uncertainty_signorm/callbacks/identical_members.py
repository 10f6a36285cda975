"""A warning while the σN-Ens members are still one model, so that a regularizer that does
nothing (identical members sit where it has no gradient) is not trained through unnoticed.

``SigmaNormClassificationRoutine`` returns :class:`IdenticalMembersWarning` from
``configure_callbacks()`` unless ``warn_identical_members=False``.
"""

from __future__ import annotations

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.utilities import rank_zero_warn
from torch import nn

from ..evaluation.diversity import signorm_cosine

__all__ = [
    "IDENTICAL_MEMBERS_COSINE",
    "IdenticalMembersWarning",
    "identical_members_message",
    "members_identical",
    "regularized_cosine",
]

#: σNorm-cos of the regularized layers at and above which the members count as one model.
IDENTICAL_MEMBERS_COSINE = 0.999


def regularized_cosine(model: nn.Module) -> float:
    """σNorm-cos of ``model``'s regularized layers, from the weights alone."""
    with torch.no_grad():
        return float(signorm_cosine(model.importances(regularized_only=True)))


def members_identical(model: nn.Module, cosine: float) -> bool:
    """Whether an ensemble of several members whose regularized layers' σNorm-cos is ``cosine``
    counts as one model (>= :data:`IDENTICAL_MEMBERS_COSINE`)."""
    return model.num_estimators > 1 and cosine >= IDENTICAL_MEMBERS_COSINE


def identical_members_message(
    cosine: float, when: str, steps: int, tau: float, diversity_strength: float
) -> str:
    """The warning when the members are still one model (σNorm-cos ``cosine`` of the
    regularized layers >= :data:`IDENTICAL_MEMBERS_COSINE`) after ``steps`` steps, ``when``
    (``"at this validation"``, ``"at the end of fit"``), with what to try."""
    return (
        f"The σN-Ens members are still one model {when}: the regularized layers' "
        f"σNorm-cos is {cosine:.5f} (>= {IDENTICAL_MEMBERS_COSINE}) after "
        f"{steps} steps, at tau={tau:.4g} and diversity_strength (lambda)="
        f"{diversity_strength:g}. Members that start identical (an exact conversion) sit where "
        f"the regularizer has no gradient, and its push grows about as lambda/tau^2 per step. "
        f"Remedies: give the model member_spread (e.g. 0.3) to leave the symmetric start, set "
        f"the routine's target_diversity (e.g. 0.9: lower targets cost accuracy at short "
        f"budgets, docs/controlled_diversity.md) to let tau follow a diversity target, or lower "
        f"tau, raise lambda or train longer. Silence with warn_identical_members=False."
    )


class IdenticalMembersWarning(Callback):
    """Warns at the first validation of a ``fit`` that finds the members identical, and when
    ``fit`` ends so (unless that validation was at the last step already).

    Args:
        diversity_target: The run's
            :class:`~torch_uncertainty_signorm.callbacks.tau_control.DiversityTargetCallback`,
            if any: when it warns that its target was missed, that warning says it instead.
    """

    def __init__(self, diversity_target: Callback | None = None) -> None:
        self.diversity_target = diversity_target
        self._warned = False  # during this fit
        self._warned_at: int | None = None  # the step of the last warning at a validation

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._warned = False

    def on_validation_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.state.fn != "fit" or trainer.sanity_checking or self._warned:
            return
        cosine = regularized_cosine(pl_module.model)
        if members_identical(pl_module.model, cosine):
            self._warned, self._warned_at = True, trainer.global_step
            rank_zero_warn(_message(pl_module, cosine, "at this validation", trainer.global_step))

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        cosine = regularized_cosine(pl_module.model)
        if self.diversity_target is not None and self.diversity_target.missed(cosine):
            return
        if members_identical(pl_module.model, cosine) and self._warned_at != trainer.global_step:
            rank_zero_warn(_message(pl_module, cosine, "at the end of fit", trainer.global_step))


def _message(pl_module: LightningModule, cosine: float, when: str, step: int) -> str:
    model = pl_module.model
    return identical_members_message(cosine, when, step, model.tau, model.config.diversity_strength)
