"""A run's logger folder: its saved configuration (:class:`SaveRunConfig`), the version an
interrupted run continues (:func:`continue_logged_run`), the folder of a run that wrote
nothing, removed (:func:`remove_unused_log_dirs`), and partial files that writes cut off by
SIGKILL left, named (:func:`report_stale_partials`)."""

from __future__ import annotations

import shutil
import sys
from functools import partial
from pathlib import Path

from jsonargparse import Namespace
from lightning.pytorch import Trainer
from lightning.pytorch.cli import SaveConfigCallback
from torch_uncertainty.utils.cli import TUSaveConfigCallback

__all__ = [
    "SaveRunConfig",
    "continue_logged_run",
    "remove_unused_log_dirs",
    "report_stale_partials",
]


class SaveRunConfig(TUSaveConfigCallback):
    """TorchUncertainty's config-saving callback, saving for every subcommand that logs.

    TorchUncertainty's saves the resolved configuration only for ``fit``; a ``test`` (or
    ``validate``, ``predict``) with a logger writes a run folder of its own, and its
    ``config.yaml`` records the ``ckpt_path`` it evaluated (the tables read it to tell a
    re-evaluation from another training run). Without a logger, as TorchUncertainty's.

    A ``test`` (``validate``, ``predict``) of a checkpoint inside its logger's own folder
    (``--ckpt_path <run>/checkpoints/<file> --trainer.logger.init_args.version=<n>``: the
    run's own test, as ``--eval_after_fit`` would have run it) leaves that folder's
    ``config.yaml`` as it is: the configuration that trained the weights it tests. An existing
    ``config.yaml`` of any other folder is still never overwritten.
    """

    def setup(self, trainer, pl_module, stage: str) -> None:
        if stage != "fit" and trainer.logger is not None and self._tests_own_checkpoint(trainer):
            return
        save = self.parser.save
        self.parser.save = partial(_save_whole, self.parser, save)  # config.yaml whole or absent
        try:
            if stage == "fit" or trainer.logger is None:
                super().setup(trainer, pl_module, stage)
            else:
                SaveConfigCallback.setup(self, trainer, pl_module, stage)
        finally:
            del self.parser.save  # the parser's own method again

    def _tests_own_checkpoint(self, trainer: Trainer) -> bool:
        """Whether ``--ckpt_path`` is a file inside the logger's folder, which holds a saved
        configuration already."""
        ckpt_path, log_dir = self.config.get("ckpt_path"), trainer.log_dir
        if not isinstance(ckpt_path, str) or "://" in ckpt_path or log_dir is None:
            return False
        run_dir = Path(log_dir).resolve()
        checkpoint = Path(ckpt_path).resolve()
        own = (
            checkpoint.is_file()
            and checkpoint.is_relative_to(run_dir)
            and (run_dir / self.config_filename).is_file()
        )
        return bool(trainer.strategy.broadcast(own))  # rank 0's reading, on every rank


def _save_whole(parser, save, config, path, *args, **kwargs) -> None:
    """``parser.save`` writing a local single file whole or not at all (a temporary file
    renamed over ``path``): a run stopped while it is written leaves no empty ``config.yaml``."""
    from ..safety.atomic_files import replaced_atomically

    overwrite, skip_none = kwargs.get("overwrite", False), kwargs.get("skip_none", True)
    if args or kwargs.get("multifile") or "://" in str(path):
        save(config, path, *args, **kwargs)
        return
    if not overwrite and Path(path).exists():
        raise ValueError(f"Refusing to overwrite existing file: {path}")
    text = parser.dump(config, skip_none=skip_none)
    with replaced_atomically(path) as partial_path:
        partial_path.write_text(text)


def continue_logged_run(config: Namespace, resumes_interruption: bool) -> bool:
    """Log a resumed run into the version it was interrupted in.

    ``fit --ckpt_path <log dir>/version_<n>/checkpoints/<file>`` of an interruption checkpoint
    sets the ``version`` of each ``class_path`` logger writing under ``<log dir>`` (and left
    without one by the user) to ``n``, in ``config`` (the ``fit`` block), in place.

    Returns:
        Whether a version was set (the run's ``config.yaml`` is then to be overwritten: it now
        records the ``ckpt_path``).
    """
    ckpt_path = config.get("ckpt_path")
    if not ckpt_path or not resumes_interruption or not Path(ckpt_path).is_file():
        return False
    run_dir = Path(ckpt_path).resolve().parent.parent  # <save_dir>/<name>/version_<n>
    version = run_dir.name.removeprefix("version_")
    if not (run_dir.name.startswith("version_") and version.isascii() and version.isdigit()):
        return False
    continued = False
    loggers = config.get("trainer", Namespace()).get("logger")
    for logger_config in loggers if isinstance(loggers, list) else [loggers]:
        is_block = isinstance(logger_config, Namespace)
        init_args = logger_config.get("init_args") if is_block else None
        if init_args is None or "version" not in init_args or init_args.version is not None:
            continue  # not a class_path logger with a version, or the user chose the version
        if Path(init_args.get("save_dir") or ".", init_args.get("name") or "").resolve() == (
            run_dir.parent
        ):
            init_args.version = int(version)
            continued = True
    return continued


def remove_unused_log_dirs(trainer: Trainer | None, started: float) -> None:
    """Remove the logger folders of a run that failed before training a step or writing a
    result, so that the next run takes its ``version_N`` (as the docs' paths assume).

    A folder is removed only when every file in it is the logger's or the saved
    ``config.yaml`` and was written by this run (since ``started``, a ``time.time()``): a
    resumed run's folder, or one holding checkpoints, results or figures, stays.
    """
    if trainer is None or not trainer.is_global_zero or trainer.global_step > 0:
        return
    for run_logger in trainer.loggers:
        folder = Path(run_logger.log_dir) if getattr(run_logger, "log_dir", None) else None
        if folder is None or not folder.is_dir():
            continue
        entries = list(folder.rglob("*"))
        if all(
            entry.is_file()
            and entry.stat().st_mtime >= started - 1
            and (
                entry.name.startswith("events.out.tfevents.")
                or entry.name in ("hparams.yaml", "config.yaml", "metrics.csv", "run_record.json")
            )
            for entry in entries
        ):
            shutil.rmtree(folder, ignore_errors=True)
            print(
                f"torch-uncertainty: removed {folder}: the run failed before training or "
                f"testing wrote anything to it.",
                file=sys.stderr,
            )


def report_stale_partials(trainer: Trainer | None, started: float) -> list[Path]:
    """At a run's setup: name the temporary files (``.<name>.<pid>-<hex>.partial``) that a
    write cut off by SIGKILL or a power cut left in this run's own logger folder and its
    ``checkpoints/`` (a resumed run's version), in a warning, and on one line of stderr those
    left in the other runs' folders beside it (``version_*`` and their ``checkpoints/``), which
    may belong to a run still writing. None is touched: a process removes only the temporary
    files it created (:func:`~signorm_lab.safety.atomic_files.
    warn_stale_partials`). Only files older than ``started`` (a ``time.time()``) count.
    Returns the files named on stderr."""
    from ..safety.atomic_files import stale_partials, warn_stale_partials

    if trainer is None or not trainer.is_global_zero:
        return []
    found: list[Path] = []
    for run_logger in trainer.loggers:
        try:
            log_dir = getattr(run_logger, "log_dir", None)
        except Exception:  # a logger computing its folder from a service
            continue
        if not log_dir:
            continue
        own = Path(log_dir)
        for folder in (own, own / "checkpoints"):
            warn_stale_partials(folder, started)
        try:
            siblings = sorted(
                entry
                for entry in own.parent.iterdir()
                if entry.is_dir() and entry.name.startswith("version_") and entry != own
            )
        except OSError:
            continue
        for sibling in siblings:
            for folder in (sibling, sibling / "checkpoints"):
                found.extend(path for path in stale_partials(folder, started) if path not in found)
    if found:
        size = sum(path.lstat().st_size for path in found if path.exists())
        shown = ", ".join(str(path) for path in found[:3]) + (", ..." if len(found) > 3 else "")
        print(
            f"torch-uncertainty: {len(found)} partial file(s) ({size / 1e6:.1f} MB) left in "
            f"other runs' folders by a write cut off (SIGKILL, a power cut), no checkpoint: "
            f"{shown}; delete them when no run writes there (a run removes only its own).",
            file=sys.stderr,
        )
    return found
