"""The logits a routine's model returns in each test step, read by a forward hook.

Callbacks that need per-input outputs during ``trainer.test`` read them here instead of
running the model a second time; :class:`TestLogitsCallback` is their base.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer
from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

__all__ = ["LogitsTap", "TestLogitsCallback"]


class LogitsTap:
    """Keeps the last member-major logits ``(M·B, C)`` of ``routine.model``.

    The last call of a step wins (TorchUncertainty also runs the model once under a flop
    counter on the first batch, with the same inputs).

    Args:
        owner: The callback's name, for error messages.
    """

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._handle: RemovableHandle | None = None
        self._logits: Tensor | None = None

    def attach(self, pl_module: LightningModule) -> None:
        """Start keeping the logits of ``pl_module.model``."""
        model = getattr(pl_module, "model", None)
        if not isinstance(model, nn.Module):
            raise TypeError(
                f"{self.owner} reads the logits of `routine.model`; "
                f"{type(pl_module).__name__} has no `model` module."
            )
        self.detach()
        self._handle = model.register_forward_hook(self._keep)

    def _keep(self, module: nn.Module, args: Any, output: Any) -> None:
        if not isinstance(output, Tensor):
            raise TypeError(
                f"{self.owner} expects the model to return logits, got {type(output).__name__}."
            )
        self._logits = output.detach()

    def take(self, batch_size: int) -> tuple[Tensor, int]:
        """This step's logits ``(M·B, C)`` for ``batch_size`` = B inputs, and M; then forgets
        them."""
        logits = self._logits
        if logits is None or logits.dim() == 0 or logits.shape[0] % batch_size:
            shape = None if logits is None else tuple(logits.shape)
            raise ValueError(
                f"{self.owner}: the model's test logits (shape {shape}) are not member-major "
                f"(M·B, C) for a batch of B = {batch_size} inputs."
            )
        self._logits = None
        return logits, logits.shape[0] // batch_size

    def detach(self) -> None:
        """Stop keeping logits (remove the hook)."""
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        self._logits = None


class TestLogitsCallback(Callback):
    """Base of the callbacks reading the model's logits in every test step: the tap is attached
    when testing starts and removed when it ends or fails; a subclass reads each step's logits
    in :meth:`on_test_logits` with ``self.tap.take(B)``."""

    def __init__(self) -> None:
        super().__init__()
        self.tap = LogitsTap(type(self).__name__)

    def on_test_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.tap.attach(pl_module)

    def on_test_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self.on_test_logits(pl_module, batch, dataloader_idx)

    def on_test_logits(self, pl_module: LightningModule, batch: Any, dataloader_idx: int) -> None:
        """Read this step's logits (``self.tap.take``) for ``batch`` of test loader
        ``dataloader_idx``."""
        raise NotImplementedError

    def on_test_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.tap.detach()

    def on_exception(
        self, trainer: Trainer, pl_module: LightningModule, exception: BaseException
    ) -> None:
        self.tap.detach()
