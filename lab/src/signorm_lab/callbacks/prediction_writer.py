"""Every test input's member probabilities, saved beside ``results.csv`` for later analyses.

TorchUncertainty's routines log aggregate metrics only; per-input analyses (uncertainty
against annotator agreement, error–rejection curves, ...) need each input's member
probabilities. :class:`TestPredictionWriter` keeps the logits the model returns in every test
step (a forward hook, no second forward) and writes, at the end of testing, one safetensors
file with, per test loader ``i`` (in ``test_dataloader()`` order), ``probs/i`` of shape
``(M, N, C)`` (float32; M = 1 for a single model) and ``targets/i`` of shape ``(N,)``.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch import LightningModule, Trainer
from safetensors.torch import save_file
from torch import Tensor
from torch_uncertainty.utils import get_logger_dir

from torch_uncertainty_signorm.callbacks.logits_tap import TestLogitsCallback
from torch_uncertainty_signorm.evaluation.prediction import member_probabilities

from ..safety.files import follow_umask

__all__ = ["TestPredictionWriter"]


class TestPredictionWriter(TestLogitsCallback):
    """Write each test loader's member probabilities and targets to ``filename``.

    The file goes into the logger's run folder (``version_<n>/``), or ``dirpath`` if given.
    Requires a routine whose ``model`` returns member-major logits ``(M·B, C)``, as
    TorchUncertainty's classification routines do.

    Args:
        filename: Name of the safetensors file.
        dirpath: Folder of the file; defaults to the logger's run folder.
        dataloaders: Indices of the test loaders to save (e.g. ``[0, 1]``: the clean test set
            and the first OOD set); every loader when ``None``.

    Raises:
        ValueError: If ``filename`` does not end with ``.safetensors`` or ``dataloaders`` is
            not a non-empty list of distinct integers >= 0.
    """

    __test__ = False  # not a pytest test class despite its name

    def __init__(
        self,
        filename: str = "test_predictions.safetensors",
        dirpath: str | Path | None = None,
        dataloaders: list[int] | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(filename, str) or not filename.endswith(".safetensors"):
            raise ValueError(f"filename must end with '.safetensors', got {filename!r}.")
        if dataloaders is not None:
            indices = list(dataloaders) if isinstance(dataloaders, (list, tuple)) else []
            valid = all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in indices)
            if not indices or not valid or len(set(indices)) != len(indices):
                raise ValueError(
                    f"dataloaders must be a non-empty list of distinct test-loader indices >= 0 "
                    f"(or None for all), got {dataloaders!r}."
                )
            dataloaders = set(indices)
        self.dataloaders = dataloaders
        self.filename = filename
        self.dirpath = None if dirpath is None else Path(dirpath)
        self._probs: dict[int, list[Tensor]] = defaultdict(list)
        self._targets: dict[int, list[Tensor]] = defaultdict(list)

    def on_test_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        super().on_test_start(trainer, pl_module)
        self._probs.clear()
        self._targets.clear()

    def on_test_logits(self, pl_module: LightningModule, batch: Any, dataloader_idx: int) -> None:
        targets = batch[1]
        logits, num_estimators = self.tap.take(targets.shape[0])
        if self.dataloaders is not None and dataloader_idx not in self.dataloaders:
            return
        binary = bool(getattr(pl_module, "binary_cls", False))
        probs = member_probabilities(logits, num_estimators, binary)
        self._probs[dataloader_idx].append(probs.cpu())
        self._targets[dataloader_idx].append(targets.detach().cpu())

    def on_test_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        super().on_test_end(trainer, pl_module)
        if not trainer.is_global_zero or not self._probs:
            return
        tensors = {}
        for index in sorted(self._probs):
            tensors[f"probs/{index}"] = torch.cat(self._probs[index], dim=1).contiguous()
            tensors[f"targets/{index}"] = torch.cat(self._targets[index]).contiguous()
        folder = self.dirpath or get_logger_dir(trainer.logger) or Path(trainer.default_root_dir)
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_file(tensors, folder / self.filename)
        follow_umask(folder / self.filename)  # safetensors writes 0600
