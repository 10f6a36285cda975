"""A checkpoint when training is interrupted, and a resume that continues the run exactly.

Lightning turns ``SIGTERM`` into an orderly stop: its signal handler sets
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
* each sample is loaded with the global torch (CPU), numpy and Python RNGs seeded from
  ``(seed, epoch, rank, position in the epoch)`` and put back afterwards, so that random
  augmentation is the same in the main process and in any worker, before and after a resume;
* on resume, the first ``k · batch_size`` indices of the interrupted epoch are skipped, ``k``
  being the number of batches already trained (no data is loaded for them);
* the global RNG states (torch, CUDA, numpy, Python) saved with the checkpoint are restored
  when training restarts, for the model's own randomness (dropout...).

Resumed and uninterrupted runs then end with bit-identical weights on the same CPU machine
(tested, with random augmentation and worker processes; another CPU's kernels round
differently), as long as the data pipeline draws its random numbers in the dataset's
``__getitem__`` (a ``collate_fn`` or ``worker_init_fn`` drawing from the workers' fresh RNG
streams is not replayed). Seeding each sample adds a small CPU cost in the process
that loads it (a worker, with ``num_workers > 0``).
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn
from lightning.pytorch.utilities.exceptions import SIGTERMException
from torch.utils.data import DataLoader, Dataset, RandomSampler, Sampler

from .. import _compat

__all__ = ["ExactResumeCheckpoint", "saved_on_interruption"]


class _EpochSeededOrder(Sampler):
    """Wraps a loader's sampler: per-epoch seeded shuffle, ``(index, sample seed)`` pairs, and
    ``skip`` leading positions once."""

    def __init__(self, sampler: Sampler, epoch_key: Callable[[], tuple[int, int, int]]) -> None:
        self.sampler = sampler
        self.epoch_key = epoch_key  # (run seed, epoch, rank)
        self.skip = 0

    def __iter__(self) -> Iterator[tuple[Any, int]]:
        seed, epoch, _rank = key = self.epoch_key()
        if isinstance(self.sampler, RandomSampler):
            self.sampler.generator = torch.Generator().manual_seed(seed + epoch)
        sample_seeds = np.random.SeedSequence(key).generate_state(len(self), np.uint64).tolist()
        skip, self.skip = self.skip, 0
        return itertools.islice(zip(self.sampler, sample_seeds, strict=False), skip, None)

    def __len__(self) -> int:
        return len(self.sampler)


class _SeededSamples(Dataset):
    """Wraps a loader's dataset: loads ``(index, seed)`` with the global RNGs seeded by ``seed``.

    Random augmentation then depends only on the sample's seed, not on the process loading it
    nor on what that process drew before; the caller's RNG states are put back after each batch.
    """

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, item: tuple[Any, int]) -> Any:
        return self.__getitems__([item])[0]

    def __getitems__(self, items: list[tuple[Any, int]]) -> list[Any]:
        with _kept_global_rngs():
            return [self._load(index, seed) for index, seed in items]

    def _load(self, index: Any, seed: int) -> Any:
        torch.default_generator.manual_seed(seed)  # the CPU generator only: CUDA's untouched
        random.seed(seed)
        np.random.seed(seed % 2**32)  # numpy's global seed has 32 bits
        return self.dataset[index]


@contextmanager
def _kept_global_rngs() -> Iterator[None]:
    """Put torch's CPU, numpy's and Python's global RNG states back as they were on exit."""
    python_state, numpy_state = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)


def _global_rng_states() -> dict[str, Any]:
    """torch's (CPU and CUDA), numpy's and Python's global RNG states, in the layout of
    Lightning's checkpoints (``torch``, ``torch.cuda``, ``numpy``, ``python``)."""
    return {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch.cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def _set_global_rng_states(states: Mapping[str, Any]) -> None:
    """Set the global RNG states that :func:`_global_rng_states` returns."""
    torch.set_rng_state(states["torch"])
    if "torch.cuda" in states:
        torch.cuda.set_rng_state_all(states["torch.cuda"])
    if "numpy" in states:
        np.random.set_state(states["numpy"])
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))


def _portable_rng_states() -> dict[str, Any]:
    """The global RNG states in types that ``torch.load(weights_only=True)`` accepts."""
    states = _global_rng_states()
    kind, keys, position, has_gauss, cached_gaussian = states.pop("numpy")
    states["numpy"] = (
        kind,
        torch.from_numpy(keys.astype(np.int64)),
        position,
        has_gauss,
        cached_gaussian,
    )
    version, internal, gauss = states.pop("python")
    states["python"] = (version, list(internal), gauss)
    return states


def _restore_rng_states(states: dict[str, Any]) -> None:
    states = dict(states)
    kind, keys, position, has_gauss, cached_gaussian = states["numpy"]
    states["numpy"] = (kind, keys.numpy().astype(np.uint32), position, has_gauss, cached_gaussian)
    if not torch.cuda.is_available():
        states.pop("torch.cuda", None)
    _set_global_rng_states(states)


class ExactResumeCheckpoint(Callback):
    """Save ``<dirpath>/<filename>.ckpt`` when ``fit`` is interrupted; resume from it exactly.

    See the module docstring for what is saved and restored. The file is removed when a later
    ``fit`` with this callback completes (it would be stale).

    Args:
        dirpath: Directory of the checkpoint. Defaults to the directory of the trainer's
            ``ModelCheckpoint``, else ``<default_root_dir>/checkpoints``.
        filename: File name without ``.ckpt``. Defaults to ``"interrupted"``.

    Example:
        >>> from signorm_lab.safety.checkpoint_io import AtomicCheckpointIO
        >>> trainer = Trainer(callbacks=[ExactResumeCheckpoint("ckpts")],
        ...                   plugins=[AtomicCheckpointIO()])  # whole or absent on disk
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
        #: Where the last interruption was saved (``None``: not interrupted, or nothing saved).
        self.saved_path: Path | None = None
        self._rng_to_restore: dict[str, Any] | None = None
        self._saving = False
        self._resumed_from_interruption = False
        self._epoch = self._rank = 0

    def ckpt_path(self, trainer: Trainer) -> Path:
        """Where the interruption checkpoint is written: with the run's own checkpoints.

        ``dirpath`` if given, else the ``ModelCheckpoint``'s directory, else the logger's run
        directory (``<save_dir>/<name>/version_<n>/checkpoints``), else
        ``<default_root_dir>/checkpoints``. A file there from another run is never overwritten:
        this run writes ``<filename>-v1.ckpt`` (``-v2``...) instead.
        """
        path = self._directory(trainer) / f"{self.filename}.ckpt"
        own = Path(trainer.ckpt_path).resolve() if self._is_own(trainer) else None
        version = 0
        while path.exists() and path.resolve() != own:
            version += 1
            path = path.with_name(f"{self.filename}-v{version}.ckpt")
        return path

    def _directory(self, trainer: Trainer) -> Path:
        dirpath = self.dirpath or getattr(trainer.checkpoint_callback, "dirpath", None)
        if dirpath is None:
            root = trainer.log_dir if trainer.loggers else trainer.default_root_dir
            dirpath = Path(root) / "checkpoints"
        return Path(dirpath)

    def _is_own(self, trainer: Trainer) -> bool:
        """Whether ``fit`` resumed from an interruption checkpoint of this run: one written by
        this callback (``<filename>.ckpt``, ``<filename>-v<k>.ckpt``) in this run's folder.
        A copy elsewhere, a backup, is the user's: it is never overwritten nor removed."""
        if not (self._resumed_from_interruption and trainer.ckpt_path):
            return False
        path = Path(trainer.ckpt_path).resolve()
        name = re.fullmatch(rf"{re.escape(self.filename)}(-v\d+)?\.ckpt", path.name)
        return name is not None and path.parent == self._directory(trainer).resolve()

    # ----------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "rng_states": _portable_rng_states(),
            "interrupted": self._saving,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.seed = state_dict["seed"]
        self._rng_to_restore = state_dict["rng_states"]
        self._resumed_from_interruption = state_dict.get("interrupted", False)

    def on_save_checkpoint(
        self, trainer: Trainer, pl_module: LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        if self._saving and trainer.validating:
            _compat.restart_validation(checkpoint["loops"]["fit_loop"])

    # ----------------------------------------------------------------------------- hooks
    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._epoch = trainer.current_epoch  # restored from the checkpoint by now
        self._rank = trainer.global_rank
        if self._rng_to_restore is not None:  # before anything draws from the global RNGs
            _restore_rng_states(self._rng_to_restore)
            self._rng_to_restore = None
        if self.seed is None:
            self.seed = int(torch.randint(0, 2**62, ()).item())
        train_loader = _compat.combined_loader(trainer.fit_loop)
        if train_loader is None:  # no training batches
            return
        skipped = trainer.fit_loop.epoch_loop.batch_progress.current.completed
        if skipped >= trainer.num_training_batches:  # the epoch's batches are all done
            skipped = 0
        val_loader = _compat.combined_loader(trainer.fit_loop.epoch_loop.val_loop)
        for loader in val_loader.flattened if val_loader is not None else ():
            self._keep_off_global_rng(loader)
        for loader in train_loader.flattened:
            self._keep_off_global_rng(loader)
            self._make_order_resumable(loader, skipped)
        # Lightning created the epoch's iterator before this hook: create it again with the
        # seeded order (and the skip) in place, leaving the restored global RNGs as they are.
        with _kept_global_rngs():
            iter(_compat.fit_data_fetcher(trainer.fit_loop))

    def _keep_off_global_rng(self, loader: Any) -> None:
        """Let ``loader`` draw its workers' base seed from a generator of its own: a new
        iterator (a resumed validation, a persistent one started later) then leaves the global
        RNG, that of the model's dropout, as in the uninterrupted run."""
        if isinstance(loader, DataLoader) and loader.generator is None:
            loader.generator = torch.Generator().manual_seed(self.seed)

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
            order = batch_sampler.sampler = _EpochSeededOrder(order, self._epoch_key)
            # DataLoader forbids setting ``dataset`` once built; its workers started with the
            # unwrapped one are dropped (persistent workers restart with the wrapped one).
            object.__setattr__(loader, "dataset", _SeededSamples(loader.dataset))
            _compat.drop_loader_iterator(loader)
        order.skip = skipped_batches * batch_sampler.batch_size

    def _epoch_key(self) -> tuple[int, int, int]:
        return self.seed, self._epoch, self._rank

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._epoch = trainer.current_epoch  # before Lightning draws the epoch's order

    def on_exception(
        self, trainer: Trainer, pl_module: LightningModule, exception: BaseException
    ) -> None:
        """Save the interruption checkpoint, unless there is nothing worth resuming.

        A failure to write it (a full disk) is reported without replacing ``exception``, the
        reason the run stopped, and leaves no partial file. The file is whole or absent when the
        trainer writes atomically (the ``torch-uncertainty`` command's
        :class:`~signorm_lab.safety.checkpoint_io.AtomicCheckpointIO`).
        """
        if trainer.state.fn != TrainerFn.FITTING:
            return
        reason = _not_resumable(trainer, pl_module, exception)
        if reason is not None:
            if trainer.global_step > 0 or isinstance(exception, _INTERRUPTIONS):
                # An error before the first step (a bad setting, missing data) is not an
                # interruption: its own message says what to fix.
                rank_zero_info(
                    f"{type(exception).__name__}: no interruption checkpoint written ({reason})."
                )
            return
        path = self.ckpt_path(trainer)
        existed = path.exists()
        self._saving = True
        try:
            trainer.save_checkpoint(path, weights_only=False)
        except Exception as error:
            if trainer.is_global_zero and not existed:
                path.unlink(missing_ok=True)  # what a non-atomic write left
            rank_zero_warn(
                f"{type(exception).__name__}: the interruption checkpoint could not "
                f"be written to {path} ({type(error).__name__}: {error})."
            )
            return
        finally:
            self._saving = False
        self.saved_path = path
        rank_zero_info(
            f"{type(exception).__name__} at epoch {trainer.current_epoch}, step "
            f"{trainer.global_step}: checkpoint written to {path}; resume with --ckpt_path {path}"
        )

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Remove the interruption checkpoint this run resumed from, if it is this run's own
        (:meth:`_is_own`): it is stale now. A file that cannot be removed (read-only storage)
        is left, with a warning."""
        path = Path(trainer.ckpt_path) if trainer.ckpt_path else None
        if trainer.is_global_zero and path is not None and self._is_own(trainer):
            try:
                path.unlink()
            except OSError as error:
                rank_zero_warn(
                    f"The interruption checkpoint {path} this run resumed from is "
                    f"stale now but could not be removed ({error}); remove it."
                )
        self._resumed_from_interruption = False


#: Stops from outside the run: a scheduler's or ``kill``'s SIGTERM, Ctrl-C.
_INTERRUPTIONS = (SIGTERMException, KeyboardInterrupt)


def saved_on_interruption(checkpoint: Mapping[str, Any]) -> bool:
    """Whether ``checkpoint`` (a loaded Lightning checkpoint) is an interruption checkpoint
    of :class:`ExactResumeCheckpoint`, rather than a best or last one."""
    states = checkpoint.get("callbacks")
    return isinstance(states, Mapping) and any(
        isinstance(state, Mapping) and state.get("interrupted") is True
        for key, state in states.items()
        if str(key).startswith(ExactResumeCheckpoint.__qualname__)
    )


def _not_resumable(
    trainer: Trainer, pl_module: LightningModule, exception: BaseException
) -> str | None:
    """Why the state at ``exception`` is not worth a checkpoint, or ``None`` when it is."""
    if trainer.global_step == 0:
        return "no optimisation step was taken: running the same command again is the same"
    if isinstance(exception, (ValueError, TypeError)):
        return (
            "a configuration or data error, which resuming would meet again: fix it and run again"
        )
    if isinstance(exception, FloatingPointError):
        return "the training state is not finite"
    tensors = itertools.chain(pl_module.parameters(), pl_module.buffers())
    if not all(torch.isfinite(t).all() for t in tensors if t.is_floating_point()):
        return "the weights are not finite"
    return None
