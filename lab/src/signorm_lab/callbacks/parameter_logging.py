"""Log a model's trainable and total parameter counts (millions) when fitting or testing, and
let Lightning's model summary count its FLOPs."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from torch import Tensor

from ..evaluation.parameter_counts import parameter_counts

__all__ = ["ParameterCountCallback"]


class ParameterCountCallback(Callback):
    """Log ``params/trainable`` and ``params/total``, in millions, for any routine.

    The counted network is ``pl_module.model`` (TorchUncertainty routines) or the module
    itself; counts follow
    :func:`~signorm_lab.evaluation.parameter_counts.parameter_counts`.
    They are sent to every logger at the current step when ``fit``, ``validate`` or
    ``test`` starts and put in ``trainer.callback_metrics``; TorchUncertainty's own
    ``test/cplx/params`` is the unrounded total.

    When ``fit`` starts, a routine without an ``example_input_array`` gets one input of the
    datamodule's validation set (else its training set, the random generators left as they
    were), so that Lightning's model summary reports the FLOPs of one input, all members
    included (the "FLOPs per input" of the printed test results), instead of ``Total FLOPs: 0``.

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

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if stage == "fit" and pl_module.example_input_array is None:
            example = _one_input(trainer.datamodule)
            if example is not None:
                pl_module.example_input_array = (example,)  # positional: forward(inputs)

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._log(trainer, pl_module)

    def on_validation_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.state.fn == "validate":
            self._log(trainer, pl_module)

    def on_test_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._log(trainer, pl_module)


def _one_input(datamodule: Any) -> Tensor | Mapping[str, Tensor] | None:
    """The inputs of a batch of one sample of the validation (else training) set, or ``None``."""
    for name in ("val_dataloader", "train_dataloader"):
        try:
            loader = getattr(datamodule, name)()
            loader = loader[0] if isinstance(loader, (list, tuple)) else loader
            with _rng_kept():  # a random augmentation must not shift the run's random stream
                batch = loader.collate_fn([loader.dataset[0]])
        except Exception:  # no such loader, or not a map-style dataset: no example
            continue
        inputs = batch[0] if isinstance(batch, (list, tuple)) else batch
        if isinstance(inputs, Tensor) or (
            isinstance(inputs, Mapping) and all(isinstance(v, Tensor) for v in inputs.values())
        ):
            return inputs
    return None


class _rng_kept:
    """Restore the torch (CPU), numpy and Python random states on exit."""

    def __enter__(self) -> None:
        self._states = torch.get_rng_state(), np.random.get_state(), random.getstate()

    def __exit__(self, *exc: object) -> None:
        torch_state, numpy_state, python_state = self._states
        torch.set_rng_state(torch_state)
        np.random.set_state(numpy_state)
        random.setstate(python_state)
