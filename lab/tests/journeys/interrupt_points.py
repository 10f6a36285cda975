"""Test-only callback: interrupt a ``torch-uncertainty`` run at a chosen point (FOR TESTS ONLY).

On the subprocess's ``PYTHONPATH``; added with
``--trainer.callbacks+=interrupt_points.InterruptAt``.
"""

from __future__ import annotations

import os
import signal

import torch
from lightning.pytorch import Callback

#: The points: the Lightning hook where the interruption lands.
HOOKS = (
    "on_sanity_check_start",
    "on_train_batch_start",
    "on_train_batch_end",
    "on_validation_batch_end",
    "on_train_epoch_end",
    "on_test_batch_start",
)


class InterruptAt(Callback):
    """In ``hook`` of ``epoch`` (any epoch when ``None``) and training/validation/test ``batch``
    (``-1`` = last): send this process ``signal_name``, raise ``RuntimeError`` (``"error"``) or
    fill the weights with NaN (``"nan"``)."""

    def __init__(
        self, hook: str, epoch: int | None = 0, batch: int | None = None, action: str = "SIGTERM"
    ) -> None:
        if hook not in HOOKS:
            raise ValueError(f"hook must be one of {HOOKS}, got {hook!r}.")
        self.hook, self.epoch, self.batch, self.action = hook, epoch, batch, action
        self.done = False

    def _fire(
        self,
        trainer,
        pl_module,
        hook: str,
        batch_idx: int | None = None,
        num_batches: int | None = None,
    ) -> None:
        if self.done or hook != self.hook or self.epoch not in (None, trainer.current_epoch):
            return
        if self.batch is not None and batch_idx != self.batch % num_batches:
            return
        self.done = True
        if self.action == "error":
            raise RuntimeError("InterruptAt: deterministic failure")
        if self.action == "nan":
            with torch.no_grad():
                for parameter in pl_module.parameters():
                    parameter.fill_(float("nan"))
            return
        os.kill(os.getpid(), getattr(signal, self.action))

    def on_sanity_check_start(self, trainer, pl_module) -> None:
        self._fire(trainer, pl_module, "on_sanity_check_start")

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._fire(
            trainer, pl_module, "on_train_batch_start", batch_idx, trainer.num_training_batches
        )

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._fire(
            trainer, pl_module, "on_train_batch_end", batch_idx, trainer.num_training_batches
        )

    def on_validation_batch_end(
        self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0
    ) -> None:
        if not trainer.sanity_checking:
            self._fire(
                trainer,
                pl_module,
                "on_validation_batch_end",
                batch_idx,
                trainer.num_val_batches[dataloader_idx],
            )

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self._fire(trainer, pl_module, "on_train_epoch_end")

    def on_test_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
        self._fire(
            trainer,
            pl_module,
            "on_test_batch_start",
            batch_idx,
            trainer.num_test_batches[dataloader_idx],
        )
