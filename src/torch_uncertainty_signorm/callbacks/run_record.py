"""Record what a comparison reads from a run beyond ``results.csv``: cost and class counts.

``signorm-compare`` adds this callback to every run it starts, whatever the recipe, and reads the
``run_record.json`` it writes into the run's folder: the parameters, the wall time of fitting
and of testing (compared between methods as ratios, measured in one comparison), the optimizer
steps taken, the class counts of the training batches seen and of the in-distribution test set
(from which the class-frequency baseline, majority-class accuracy and prior NLL, follows), and
the run's provenance: the package's commit when it runs from a git checkout, the versions of
the libraries that decide the numbers, Python and the device.
"""

from __future__ import annotations

import json
import platform
import subprocess
import time
from collections import Counter
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer

from ..evaluation.parameter_counts import parameter_counts
from ..safety.atomic_files import replaced_atomically

__all__ = ["RUN_RECORD_FILENAME", "RunRecordCallback"]

RUN_RECORD_FILENAME = "run_record.json"
#: The distributions whose versions a run records.
PACKAGES = (
    "torch-uncertainty-signorm",
    "torch-uncertainty",
    "torch",
    "lightning",
    "torchvision",
    "timm",
    "transformers",
    "numpy",
    "scikit-learn",
)


def provenance(device: str) -> dict[str, Any]:
    """The package's commit (``None`` outside a git checkout) and whether its source differs
    from it, the libraries' versions, Python and ``device``."""
    source = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=source, capture_output=True, text=True, timeout=10, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    modified = git("status", "--porcelain", ".") if commit else None
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = None
    return {
        "commit": commit,
        "source_modified": None if modified is None else bool(modified),
        "versions": versions,
        "python": platform.python_version(),
        "device": device,
    }


def _targets(batch: Any) -> torch.Tensor | None:
    """The class targets of a ``(inputs, targets)`` batch, or ``None`` for another layout."""
    if isinstance(batch, (list, tuple)) and len(batch) >= 2:
        target = batch[-1]
        if isinstance(target, torch.Tensor) and target.ndim == 1 and not target.is_floating_point():
            return target
    return None


def _device(pl_module: LightningModule) -> str:
    device = pl_module.device
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    processor = platform.processor() or platform.machine()
    return f"{device.type} ({processor}, {torch.get_num_threads()} threads)"


class RunRecordCallback(Callback):
    """Write ``run_record.json`` (cost, steps, class counts) into the logger's folder.

    Fit time runs from ``on_train_start`` to ``on_train_end`` (validation included) and is kept
    in checkpoints, so a resumed run reports its whole fit; test time covers the test loop of
    the last ``test`` call. Only ``(inputs, targets)`` batches with integer targets are counted.

    Example:
        >>> trainer = Trainer(callbacks=[RunRecordCallback()])
    """

    def __init__(self) -> None:
        self.fit_seconds = 0.0
        self.train_counts: Counter[int] = Counter()
        self.test_counts: Counter[int] = Counter()
        self.test_seconds: float | None = None
        self._started: float | None = None

    def state_dict(self) -> dict[str, Any]:
        return {
            "fit_seconds": self._fit_so_far(),
            "train_counts": {int(k): int(v) for k, v in self.train_counts.items()},
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.fit_seconds = float(state_dict.get("fit_seconds", 0.0))
        self.train_counts = Counter(
            {int(k): int(v) for k, v in state_dict.get("train_counts", {}).items()}
        )

    def _fit_so_far(self) -> float:
        running = time.perf_counter() - self._started if self._started is not None else 0.0
        return self.fit_seconds + running

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._started = time.perf_counter()

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if (targets := _targets(batch)) is not None:
            self.train_counts.update(targets.tolist())

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.fit_seconds = self._fit_so_far()
        self._started = None
        self._write(trainer, pl_module)

    def on_test_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.test_counts = Counter()
        self._test_started = time.perf_counter()

    def on_test_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if dataloader_idx == 0 and (targets := _targets(batch)) is not None:
            self.test_counts.update(targets.tolist())

    def on_test_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.test_seconds = time.perf_counter() - self._test_started
        self._write(trainer, pl_module)

    def record(self, trainer: Trainer, pl_module: LightningModule) -> dict[str, Any]:
        """What ``run_record.json`` holds, as a dictionary."""
        counts = parameter_counts(getattr(pl_module, "model", pl_module))
        return {
            "params_total": counts["total"],
            "params_trainable": counts["trainable"],
            "optimizer_steps": int(trainer.global_step),
            "fit_seconds": round(self.fit_seconds, 3),
            "test_seconds": None if self.test_seconds is None else round(self.test_seconds, 3),
            "train_class_counts": {str(k): v for k, v in sorted(self.train_counts.items())},
            "test_class_counts": {str(k): v for k, v in sorted(self.test_counts.items())},
            "provenance": provenance(_device(pl_module)),
        }

    def _write(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not trainer.is_global_zero or trainer.log_dir is None:
            return
        path = Path(trainer.log_dir) / RUN_RECORD_FILENAME
        text = json.dumps(self.record(trainer, pl_module), indent=1) + "\n"
        with replaced_atomically(path) as partial:
            partial.write_text(text)
