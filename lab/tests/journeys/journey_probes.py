"""A callback the journeys add on the command line (``tests/journeys`` on ``PYTHONPATH``)."""

import json
from pathlib import Path

from lightning.pytorch import Callback, LightningModule, Trainer
from safetensors.torch import save_file


class SaveRunningStatistics(Callback):
    """After each training step, each process writes its normalization layers' running statistics
    to ``<directory>/rank<r>.safetensors`` (the last step's remain), so a test can compare the
    processes' models before DDP broadcasts rank 0's buffers again at the next forward."""

    def __init__(self, directory: str) -> None:
        self.directory = Path(directory)

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, *args) -> None:
        statistics = {
            name: buffer.detach().cpu().contiguous()
            for name, buffer in pl_module.named_buffers()
            if "running_" in name
        }
        self.directory.mkdir(parents=True, exist_ok=True)
        save_file(statistics, str(self.directory / f"rank{trainer.global_rank}.safetensors"))


class RecordTau(Callback):
    """After each training step, each process appends the regularizer's τ to
    ``<directory>/tau_rank<r>.json``."""

    def __init__(self, directory: str) -> None:
        self.directory = Path(directory)
        self.taus: list[float] = []

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, *args) -> None:
        self.taus.append(float(pl_module.model.penalty.tau))
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"tau_rank{trainer.global_rank}.json"
        path.write_text(json.dumps(self.taus))
