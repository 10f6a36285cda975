"""Log a model's trainable and total parameter counts (millions) when fitting or testing."""

from __future__ import annotations

import torch
from lightning.pytorch import Callback, LightningModule, Trainer

from ..parameter_counts import parameter_counts

__all__ = ["ParameterCountCallback"]


class ParameterCountCallback(Callback):
    """Log ``params/trainable`` and ``params/total``, in millions, for any routine.

    The counted network is ``pl_module.model`` (TorchUncertainty routines) or the module
    itself; counts follow :func:`~torch_uncertainty_signorm.parameter_counts.parameter_counts`.
    They are sent to every logger at the current step when ``fit``, ``validate`` or
    ``test`` starts and put in ``trainer.callback_metrics``; TorchUncertainty's own
    ``test/cplx/params`` is the unrounded total.

    Example:
        >>> trainer = Trainer(callbacks=[ParameterCountCallback()])
    """

    def _log(self, trainer: Trainer, pl_module: LightningModule) -> None:
        model = getattr(pl_module, "model", pl_module)
        counts = {f"params/{k}": v / 1e6 for k, v in parameter_counts(model).items()}
        for key, value in counts.items():
            trainer.callback_metrics[key] = torch.tensor(value)
        if trainer.is_global_zero:
            for logger in trainer.loggers:
                logger.log_metrics(counts, step=trainer.global_step)

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._log(trainer, pl_module)

    def on_validation_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.state.fn == "validate":
            self._log(trainer, pl_module)

    def on_test_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._log(trainer, pl_module)
