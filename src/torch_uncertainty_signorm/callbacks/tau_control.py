"""The τ controller of ``target_diversity`` as a Lightning callback: τ set before every step.

:class:`~torch_uncertainty_signorm.signorm.diversity_target.DiversityTarget` holds the
arithmetic; :class:`DiversityTargetCallback` runs it in a ``fit``: it builds the controller when
training starts (with the optimiser's momentum as its lookahead), sets the model's τ before each
optimisation step from the weights' σNorm-cos, feeds it the ensemble's validation accuracy, and
says when the target costs accuracy or was missed. ``SigmaNormClassificationRoutine`` returns it
from ``configure_callbacks()`` when ``target_diversity`` is set, and hands it the checkpoint's
``signorm_diversity_target`` entry (:meth:`~DiversityTargetCallback.save_state`,
:meth:`~DiversityTargetCallback.load_state`) so that every checkpoint, weights-only ones and
``load_from_checkpoint`` included, keeps it as before. τ itself is not in that entry: the
controller reads and sets the model's, which the checkpoint holds once, under ``signorm_tau``.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.utilities import rank_zero_warn

from ..signorm.checkpoint_tau import TARGET_STATE_KEY
from ..signorm.diversity_target import (
    TARGET_TOLERANCE,
    DiversityTarget,
    missed_target_message,
    optimizer_lookahead,
    target_cost_message,
    tested_off_target_message,
)
from .identical_members import members_identical, regularized_cosine

__all__ = ["TARGET_STATE_KEY", "DiversityTargetCallback"]


class DiversityTargetCallback(Callback):
    """Adjusts τ every optimisation step so that the regularized layers' σNorm-cos settles at
    ``target``.

    Args:
        target: σNorm-cos of the regularized layers to reach and hold, in (0, 1).
        warn_identical_members: Warn when training starts from identical members, which the
            controller cannot steer (the routine's ``warn_identical_members``).
    """

    def __init__(self, target: float, warn_identical_members: bool = True) -> None:
        self.target = target
        self.warn_identical_members = warn_identical_members
        #: The controller of the current ``fit`` (``None`` before training starts).
        self.controller: DiversityTarget | None = None
        self._loaded_state: dict | None = None
        #: ``(steps, σNorm-cos)`` where this process's last ``fit`` ended, and whether it missed.
        self.fit_end: tuple[int, float] | None = None
        self._fit_missed = False

    def save_state(self, checkpoint: dict[str, Any]) -> None:
        """Write the controller's state to ``checkpoint`` (nothing before training starts)."""
        if self.controller is not None:
            checkpoint[TARGET_STATE_KEY] = self.controller.state_dict()

    def load_state(self, checkpoint: dict[str, Any]) -> None:
        """Keep ``checkpoint``'s controller state for the next training start."""
        self._loaded_state = checkpoint.get(TARGET_STATE_KEY)

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        model = pl_module.model
        optimizer = trainer.optimizers[0] if trainer.optimizers else None
        lookahead = (
            1.0 if optimizer is None else optimizer_lookahead(optimizer, model.scale_logits())
        )
        self.controller = DiversityTarget(  # τ stays the model's: the controller sets it there
            self.target, model, trainer.estimated_stepping_batches, lookahead=lookahead
        )
        if self._loaded_state is not None:
            self.controller.load_state_dict(self._loaded_state)
            self._loaded_state = None
        elif self.warn_identical_members and members_identical(
            model, cosine := regularized_cosine(pl_module.model)
        ):
            rank_zero_warn(
                f"target_diversity={self.target:g} starts from identical members "
                f"(the regularized layers' σNorm-cos is {cosine:.5f}): the controller has "
                f"nothing to steer until the heads' small asymmetry grows, so tau falls to "
                f"its bound and the members may then overshoot the target. Give the model "
                f"member_spread (e.g. 0.3) for a controlled approach."
            )

    def on_train_batch_start(
        self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int
    ) -> None:
        """τ for this step, from σNorm-cos of the weights (the step's forward leaves it as is);
        once per optimisation step under gradient accumulation."""
        controller = self.controller
        if controller is not None and controller.step != trainer.global_step:
            controller.update(regularized_cosine(pl_module.model), trainer.global_step)

    def on_validation_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Feed the ensemble's validation accuracy (the routine's member-health sums) to the
        controller; warn when the target costs accuracy."""
        controller, health = self.controller, pl_module.val_health
        if (
            controller is None
            or trainer.state.fn != "fit"
            or trainer.sanity_checking
            or health.update_count == 0
        ):
            return
        accuracy = float(health.compute().accuracy()[-1])  # the routine's compute() reuses it
        best = controller.best_accuracy
        if controller.validated(accuracy):
            rank_zero_warn(
                target_cost_message(
                    controller,
                    best,
                    accuracy,
                    regularized_cosine(pl_module.model),
                    trainer.global_step,
                )
            )

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        cosine = regularized_cosine(pl_module.model)
        self.fit_end, self._fit_missed = (trainer.global_step, cosine), self.missed(cosine)
        if self._fit_missed:
            rank_zero_warn(
                missed_target_message(
                    self.controller,
                    cosine,
                    trainer.global_step,
                    getattr(pl_module.model, "member_spread", 0.0),
                )
            )

    def on_test_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Warn, once per test, when the tested weights are away from the target: ``test``
        after ``fit`` reads the best checkpoint by validation accuracy, which may predate the
        target (weights the end of ``fit`` warned about already are not warned again)."""
        checkpoint = getattr(trainer, "ckpt_path", None)
        cosine = regularized_cosine(pl_module.model)
        if abs(cosine - self.target) <= TARGET_TOLERANCE or (self._fit_missed and not checkpoint):
            return
        rank_zero_warn(tested_off_target_message(self.target, cosine, checkpoint, self.fit_end))

    def missed(self, cosine: float) -> bool:
        """Whether a run ending at σNorm-cos ``cosine`` misses the target (and is warned so)."""
        return self.controller is not None and not self.controller.reached(cosine)
