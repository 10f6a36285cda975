"""A run stopped by SIGTERM or Ctrl-C: its exit code (:class:`RunInterrupted`), the checkpoint
it left, and the command resuming it (:func:`resume_command`, :func:`report_interruption`)."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lightning.pytorch import Trainer

from .tu_recipes import SUBCOMMANDS

__all__ = [
    "SIGINT_EXIT_CODE",
    "SIGTERM_EXIT_CODE",
    "RunInterrupted",
    "interruption_checkpoint",
    "report_interruption",
    "resume_command",
]

#: Exit codes of a run stopped by SIGTERM / Ctrl-C (128 + signal number, as shells report them).
SIGTERM_EXIT_CODE, SIGINT_EXIT_CODE = 143, 130


class RunInterrupted(SystemExit):
    """A run stopped by SIGTERM (exit code 143 = 128 + 15) or Ctrl-C (130 = 128 + 2).

    Schedulers read a non-zero code as "not finished"; ``checkpoint`` is the interruption
    checkpoint to resume from (``None`` when none was written); ``tested`` the best
    checkpoint of a finished ``fit`` whose ``--eval_after_fit`` test was stopped.
    """

    def __init__(self, code: int, checkpoint: Path | None, tested: Path | None = None) -> None:
        super().__init__(code)
        self.checkpoint = checkpoint
        self.tested = tested


def interruption_checkpoint(trainer: Trainer) -> Path | None:
    """The checkpoint an :class:`~signorm_lab.callbacks.ExactResumeCheckpoint` of
    ``trainer`` saved on interruption, if any."""
    from ..callbacks.exact_resume import ExactResumeCheckpoint

    paths = [
        callback.saved_path
        for callback in trainer.callbacks
        if isinstance(callback, ExactResumeCheckpoint)
    ]
    return next((path for path in paths if path is not None), None)


def resume_command(
    args: list[str], checkpoint: Path, subcommand: str | None = None, extra: Sequence[str] = ()
) -> str:
    """The ``torch-uncertainty`` command line ``args`` resumed from ``checkpoint`` (run as
    ``subcommand``, e.g. ``"test"``, when given; ``extra`` arguments added)."""
    kept, skip = [], False
    for arg in args:
        if skip or arg.startswith("--ckpt_path="):
            skip = False
            continue
        skip = arg == "--ckpt_path"
        if not skip:
            kept.append(arg)
    if (
        subcommand is not None
        and (at := next((i for i, arg in enumerate(kept) if arg in SUBCOMMANDS), None)) is not None
    ):
        kept[at] = subcommand
    return shlex.join(["torch-uncertainty", *kept, *extra, "--ckpt_path", str(checkpoint)])


def _same_version(args: list[str], checkpoint: Path) -> list[str]:
    """The logger version pin that makes a test of ``checkpoint`` (``<run>/checkpoints/<file>``
    of a ``version_<n>`` folder) write into that run's folder, unless ``args`` set a version."""
    version = checkpoint.parent.parent.name.removeprefix("version_")
    pinned = any(arg.startswith("--trainer.logger.init_args.version") for arg in args)
    if (
        pinned
        or checkpoint.parent.name != "checkpoints"
        or not (version.isascii() and version.isdigit())
    ):
        return []
    return [f"--trainer.logger.init_args.version={version}"]


def report_interruption(stop: RunInterrupted, args: Any) -> None:
    """Say on stderr what an interrupted run left and the command to go on with.

    Args:
        stop: The interruption.
        args: The command's arguments (``sys.argv[1:]`` when ``None``).
    """
    argv = sys.argv[1:] if args is None else args
    if stop.checkpoint is not None:
        command = resume_command(argv, stop.checkpoint) if isinstance(argv, list) else None
        print(
            f"torch-uncertainty interrupted: checkpoint {stop.checkpoint}"
            + (f"\nResume with: {command}" if command else ""),
            file=sys.stderr,
        )
    elif stop.tested is not None:  # fit had finished: its best checkpoint is to be tested
        command = (
            resume_command(argv, stop.tested, "test", _same_version(argv, stop.tested))
            if isinstance(argv, list)
            else f"torch-uncertainty test --config <recipe> --ckpt_path {stop.tested}"
        )
        print(
            f"torch-uncertainty interrupted while testing after fit: training had finished "
            f"(the same command again would train again). Test its best checkpoint (into the "
            f"run's own folder, completing its record) with: "
            f"{command}",
            file=sys.stderr,
        )
    else:
        print(
            "torch-uncertainty interrupted: no checkpoint written (nothing to resume: no "
            "optimisation step was taken, or the state was not finite); run the same "
            "command again.",
            file=sys.stderr,
        )
