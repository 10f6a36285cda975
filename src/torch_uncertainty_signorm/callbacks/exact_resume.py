"""A checkpoint when training is interrupted, and a resume that continues the run exactly.

Lightning 2.6 already turns ``SIGTERM`` into an orderly stop: its signal handler sets
``trainer.received_sigterm``, the training loop raises ``SIGTERMException`` once the current
batch is done and every callback's ``on_exception`` runs. Lightning only saves a checkpoint
there under SLURM auto-requeue. :class:`ExactResumeCheckpoint` saves one on any interruption of
``fit`` (``SIGTERM``, Ctrl-C, a crash), so that::

    torch-uncertainty fit --config recipe.yaml --ckpt_path <dirpath>/interrupted.ckpt

continues where the run stopped. Lightning restores the weights, the optimiser, the schedulers,
the σBN running statistics, the loops' counters and the routine's state, but a mid-epoch resume
restarts the data loader from the first batch of a newly shuffled epoch (Lightning warns about
it for loaders without ``state_dict``). This callback makes the data order resumable for any
map-style loader, without changing the user's datamodule:

* each epoch's shuffle is drawn from a generator seeded by ``(seed, epoch)``, the seed being
  drawn once from the global RNG (so ``seed_everything`` fixes it) and saved in the checkpoint;
* on resume, the first ``k · batch_size`` indices of the interrupted epoch are skipped, ``k``
  being the number of batches already trained (no data is loaded for them);
* the global RNG states (torch, CUDA, numpy, Python) saved with the checkpoint are restored
  when training restarts.

Resumed and uninterrupted runs then end with bit-identical weights on CPU (tested), as long as
the data pipeline draws no random numbers in worker processes (the workers are restarted
with fresh seeds; the batch order stays exact) and, with random augmentation in the main
process, except for the augmentation of the one batch Lightning prefetches before the
checkpoint is written.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lightning.fabric.utilities.seed import _collect_rng_states, _set_rng_states
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.utilities import rank_zero_warn
from torch.utils.data import DataLoader, RandomSampler, Sampler

__all__ = ["ExactResumeCheckpoint"]


class _EpochSeededOrder(Sampler):
    """Wraps a loader's sampler: per-epoch seeded shuffle, and ``skip`` leading indices once."""

    def __init__(self, sampler: Sampler, seed_for_epoch: Callable[[], int]) -> None:
        self.sampler = sampler
        self.seed_for_epoch = seed_for_epoch
        self.skip = 0

    def __iter__(self) -> Iterator[int]:
        if isinstance(self.sampler, RandomSampler):
            self.sampler.generator = torch.Generator().manual_seed(self.seed_for_epoch())
        skip, self.skip = self.skip, 0
        return itertools.islice(iter(self.sampler), skip, None)

    def __len__(self) -> int:
        return len(self.sampler)


def _portable_rng_states() -> dict[str, Any]:
    """The global RNG states in types that ``torch.load(weights_only=True)`` accepts."""
    states = _collect_rng_states()
    kind, keys, position, has_gauss, cached_gaussian = states.pop("numpy")
    states["numpy"] = (kind, torch.from_numpy(keys.astype(np.int64)), position, has_gauss,
                       cached_gaussian)
    version, internal, gauss = states.pop("python")
    states["python"] = (version, list(internal), gauss)
    return states


def _restore_rng_states(states: dict[str, Any]) -> None:
    states = dict(states)
    kind, keys, position, has_gauss, cached_gaussian = states["numpy"]
    states["numpy"] = (kind, keys.numpy().astype(np.uint32), position, has_gauss, cached_gaussian)
    if not torch.cuda.is_available():
        states.pop("torch.cuda", None)
    _set_rng_states(states)


class ExactResumeCheckpoint(Callback):
    """Save ``<dirpath>/<filename>.ckpt`` when ``fit`` is interrupted; resume from it exactly.

    See the module docstring for what is saved and restored. The file is removed when a later
    ``fit`` with this callback completes (it would be stale).

    Args:
        dirpath: Directory of the checkpoint. Defaults to the directory of the trainer's
            ``ModelCheckpoint``, else ``<default_root_dir>/checkpoints``.
        filename: File name without ``.ckpt``. Defaults to ``"interrupted"``.

    Example:
        >>> trainer = Trainer(callbacks=[ExactResumeCheckpoint("ckpts")])
        >>> trainer.fit(routine, datamodule)  # SIGTERM: ckpts/interrupted.ckpt is written
        >>> trainer.fit(routine, datamodule, ckpt_path="ckpts/interrupted.ckpt")
    """

    def __init__(self, dirpath: str | Path | None = None, filename: str = "interrupted") -> None:
        if not isinstance(filename, str) or not filename or "/" in filename:
            raise ValueError(
                f"filename must be a non-empty file name without directory, got {filename!r}."
            )
        self.dirpath = None if dirpath is None else Path(dirpath)
        self.filename = filename
        self.seed: int | None = None
        self._rng_to_restore: dict[str, Any] | None = None
        self._training = False
        self._epoch = 0

    def ckpt_path(self, trainer: Trainer) -> Path:
        """Where the interruption checkpoint is written."""
        if self.dirpath is not None:
            return self.dirpath / f"{self.filename}.ckpt"
        checkpoint = trainer.checkpoint_callback
        dirpath = getattr(checkpoint, "dirpath", None)
        if dirpath is None:
            dirpath = Path(trainer.default_root_dir) / "checkpoints"
        return Path(dirpath) / f"{self.filename}.ckpt"

    # ----------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "rng_states": _portable_rng_states()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.seed = state_dict["seed"]
        self._rng_to_restore = state_dict["rng_states"]

    # ----------------------------------------------------------------------------- hooks
    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self.seed is None:
            self.seed = int(torch.randint(0, 2**62, ()).item())
        self._epoch = trainer.current_epoch  # restored from the checkpoint by now
        self._training = True
        if trainer.fit_loop._combined_loader is None:  # no training batches
            return
        skipped = trainer.fit_loop.epoch_loop.batch_progress.current.completed
        for loader in trainer.fit_loop._combined_loader.flattened:
            self._make_order_resumable(loader, skipped)
        # Lightning created the epoch's iterator before this hook: create it again with the
        # seeded order (and the skip) in place.
        iter(trainer.fit_loop._data_fetcher)
        if self._rng_to_restore is not None:
            _restore_rng_states(self._rng_to_restore)
            self._rng_to_restore = None

    def _make_order_resumable(self, loader: Any, skipped_batches: int) -> None:
        batch_sampler = getattr(loader, "batch_sampler", None)
        if not isinstance(loader, DataLoader) or batch_sampler is None:
            rank_zero_warn(
                f"ExactResumeCheckpoint cannot resume the order of a {type(loader).__name__} "
                "without a batch sampler; a mid-epoch resume restarts its epoch."
            )
            return
        order = batch_sampler.sampler
        if not isinstance(order, _EpochSeededOrder):
            order = batch_sampler.sampler = _EpochSeededOrder(order, self._epoch_seed)
        order.skip = skipped_batches * batch_sampler.batch_size

    def _epoch_seed(self) -> int:
        return self.seed + self._epoch

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._epoch = trainer.current_epoch  # before Lightning draws the epoch's order

    def on_exception(
        self, trainer: Trainer, pl_module: LightningModule, exception: BaseException
    ) -> None:
        if self._training:
            trainer.save_checkpoint(self.ckpt_path(trainer))

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._training = False
        path = self.ckpt_path(trainer)
        if trainer.is_global_zero and path.is_file():
            path.unlink()
