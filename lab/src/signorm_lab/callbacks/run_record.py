"""Record what a comparison reads from a run beyond ``results.csv``: cost and class counts.

``signorm-compare`` adds this callback to every run it starts, whatever the recipe, and reads the
``run_record.json`` it writes into the run's folder: the parameters, the wall time of fitting
and of testing (compared between methods as ratios, measured in one comparison), the optimizer
steps taken, the class counts of the training batches seen and of the in-distribution test set
(from which the class-frequency baseline, majority-class accuracy and prior NLL, follows), and
the run's provenance: the package's commit when it runs from a git checkout, the versions of
the libraries that decide the numbers, Python and the device, and the training step of the
checkpoint its test evaluated (``tested_step``). The record written when ``fit``
ends names the checkpoint a test after it would evaluate (``best_checkpoint``), so that a run
stopped during that test can be tested later into the same folder, where the record keeps the
fit's fields.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer

from ..evaluation.parameter_counts import parameter_counts
from ..reproduction.runs import (
    FINISHED_KEYS,
    REQUEST_ENV,
    RUN_RECORD_FILENAME,
    file_sha256,
    package_versions,
    read_run_record,
)
from ..safety.atomic_files import replaced_atomically

__all__ = [
    "FINISHED_KEYS",
    "REQUEST_ENV",
    "RUN_RECORD_FILENAME",
    "RunRecordCallback",
    "file_sha256",
    "package_versions",
    "read_run_record",
]

#: What a record takes from the one its folder holds when its process tested the run's own
#: checkpoint without fitting: the fit's cost, counts, best checkpoint and what decided it.
FIT_KEYS = (
    "params_total",
    "params_trainable",
    "optimizer_steps",
    "fit_seconds",
    "train_class_counts",
    "best_checkpoint",
    "best_checkpoint_sha256",
    "request",
    "seed",
    "config_sha256",
)


def _request() -> dict[str, Any] | None:
    """The request signorm-compare handed this process (:data:`REQUEST_ENV`), else ``None``."""
    try:
        request = json.loads(os.environ.get(REQUEST_ENV, "null"))
    except ValueError:
        return None
    return request if isinstance(request, dict) else None


def _seed() -> int | None:
    """The seed Lightning's ``seed_everything`` seeded this process with, else ``None``."""
    seed = os.environ.get("PL_GLOBAL_SEED", "")
    return int(seed) if seed.isascii() and seed.lstrip("-").isdigit() else None


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
    return {
        "commit": commit,
        "source_modified": None if modified is None else bool(modified),
        "versions": package_versions(),
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


def _inside(path: str | Path | None, folder: str | Path) -> str | None:
    """``path`` relative to ``folder`` (POSIX form) when it is a file inside it, else ``None``."""
    if not path:
        return None
    resolved, root = Path(path).resolve(), Path(folder).resolve()
    if not resolved.is_relative_to(root) or not resolved.is_file():
        return None
    return resolved.relative_to(root).as_posix()


def _fitted_record(log_dir: Path) -> dict[str, Any] | None:
    """The record in ``log_dir`` when it holds a finished fit (its ``fit_seconds``), else
    ``None``; one that cannot be read is named in a warning."""
    path = log_dir / RUN_RECORD_FILENAME
    if not path.is_file():
        return None
    try:
        record = read_run_record(path)
    except (OSError, ValueError) as error:
        warnings.warn(
            f"{error} The record of this test does not keep the fit's cost and counts.",
            stacklevel=3,
        )
        return None
    if not isinstance(record.get("fit_seconds"), int | float):
        return None
    return record


def checkpoint_step(ckpt_path: str | Path | None, current: int) -> int | None:
    """The training step of the weights a test evaluates: the ``global_step`` saved in the
    checkpoint file it loaded (memory-mapped: only the small records are read), or ``current``
    when it tests the weights in memory; ``None`` when the file holds none."""
    if not ckpt_path:
        return int(current)
    if not Path(ckpt_path).is_file():
        return None
    checkpoint = torch.load(ckpt_path, map_location="cpu", weights_only=True, mmap=True)
    step = checkpoint.get("global_step") if isinstance(checkpoint, dict) else None
    return step if type(step) is int else None


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

    ``best_checkpoint`` is the checkpoint a test after ``fit`` evaluates
    (``trainer.checkpoint_callback.best_model_path``, what ``ckpt_path="best"`` loads), relative
    to the run's folder, or ``None`` (none saved, or saved outside the folder). A process that
    tests a checkpoint of its logger's own folder without fitting (``test --ckpt_path
    <run>/checkpoints/<file> --trainer.logger.init_args.version=<n>``) keeps the fit's fields
    (:data:`FIT_KEYS`) and ``provenance`` from the record the folder holds, and adds its own
    as ``test_provenance``: the record then reads as that of a run tested after its fit.

    Example:
        >>> trainer = Trainer(callbacks=[RunRecordCallback()])
    """

    def __init__(self) -> None:
        self.fit_seconds = 0.0
        self.train_counts: Counter[int] = Counter()
        self.test_counts: Counter[int] = Counter()
        self.test_seconds: float | None = None
        self.best_checkpoint: str | None = None
        self.best_checkpoint_sha256: str | None = None
        self.tested_step: int | None = None
        self._started: float | None = None
        self._fitted = False  # whether this process ran a fit to its end

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

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Record what decides the run before it trains: an interrupted run says what it was."""
        if trainer.is_global_zero and trainer.log_dir is not None:
            started = {"request": _request(), "seed": _seed(), **self._config(trainer)}
            started["fit_seconds"] = None
            started |= {"test_seconds": None, "best_checkpoint": None}
            with replaced_atomically(Path(trainer.log_dir) / RUN_RECORD_FILENAME) as partial:
                partial.write_text(json.dumps(started, indent=1) + "\n")

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._started = time.perf_counter()

    @staticmethod
    def _config(trainer: Trainer) -> dict[str, str | None]:
        """The sha256 of the configuration the command saved in the run's folder, if any."""
        path = Path(trainer.log_dir or ".", "config.yaml")
        return {"config_sha256": file_sha256(path) if trainer.log_dir and path.is_file() else None}

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if (targets := _targets(batch)) is not None:
            self.train_counts.update(targets.tolist())

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.fit_seconds = self._fit_so_far()
        self._started = None
        self._fitted = True
        checkpoint = trainer.checkpoint_callback
        best = getattr(checkpoint, "best_model_path", None) if checkpoint is not None else None
        self.best_checkpoint = None if trainer.log_dir is None else _inside(best, trainer.log_dir)
        if self.best_checkpoint is not None:
            self.best_checkpoint_sha256 = file_sha256(Path(trainer.log_dir, self.best_checkpoint))
        self._write(trainer, pl_module)

    def on_test_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self.test_counts = Counter()
        self.tested_step = checkpoint_step(trainer.ckpt_path, trainer.global_step)
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
        record = {
            "params_total": counts["total"],
            "params_trainable": counts["trainable"],
            "optimizer_steps": int(trainer.global_step),
            "fit_seconds": round(self.fit_seconds, 3),
            "test_seconds": None if self.test_seconds is None else round(self.test_seconds, 3),
            "train_class_counts": {str(k): v for k, v in sorted(self.train_counts.items())},
            "test_class_counts": {str(k): v for k, v in sorted(self.test_counts.items())},
            "best_checkpoint": self.best_checkpoint,
            "best_checkpoint_sha256": self.best_checkpoint_sha256,
            "tested_step": self.tested_step,
            "request": _request(),
            "seed": _seed(),
            **self._config(trainer),
            "provenance": provenance(_device(pl_module)),
        }
        if (fitted := self._fit_of_this_folder(trainer)) is not None:
            record |= {key: fitted[key] for key in FIT_KEYS if key in fitted}
            if "provenance" in fitted:
                record["test_provenance"] = record["provenance"]
                record["provenance"] = fitted["provenance"]
        return record

    def _fit_of_this_folder(self, trainer: Trainer) -> dict[str, Any] | None:
        """The record of the fit that trained the checkpoint this process tests, when this
        process did not fit and tests a checkpoint of its logger's own folder, else ``None``."""
        if self._fitted or trainer.log_dir is None:
            return None
        tested = trainer.ckpt_path
        if not isinstance(tested, str | Path) or _inside(tested, trainer.log_dir) is None:
            return None
        return _fitted_record(Path(trainer.log_dir))

    def _write(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not trainer.is_global_zero or trainer.log_dir is None:
            return
        path = Path(trainer.log_dir) / RUN_RECORD_FILENAME
        text = json.dumps(self.record(trainer, pl_module), indent=1) + "\n"
        with replaced_atomically(path) as partial:
            partial.write_text(text)
