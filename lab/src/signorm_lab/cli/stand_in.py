"""The stand-in data on the console: the ``signorm-standin-data`` command, and what a run on
stand-in files says and writes (:mod:`signorm_lab.datamodules.stand_in_data` writes
and accepts the files)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..datamodules.stand_in_data import (
    HEALTH_CHECKS_OFF,
    MANIFEST,
    RUN_LABEL,
    SMOKE_TEST_OVERRIDES,
    STAND_IN_COLUMN,
    STAND_IN_LABEL,
    accept_stand_in_files,
    read_manifest,
    write_stand_in,
)

__all__ = ["main", "stand_in_label", "use_stand_in_data"]


def stand_in_label(root: str | Path) -> Any:
    """A Lightning callback labelling a run on the stand-ins under ``root``: :data:`RUN_LABEL`
    in its run folder (when the run has one: not under ``fast_dev_run``, which logs nothing),
    :data:`STAND_IN_COLUMN` logged as 1 by each test (its ``results.csv`` row then says it) and
    a console line after the test results. It also turns the routine's member health warnings
    off (its ``health_warnings``, when it has them), saying so in one line
    (:data:`HEALTH_CHECKS_OFF`)."""
    from lightning.pytorch import Callback

    class StandInDataLabel(Callback):
        def setup(self, trainer, pl_module, stage: str) -> None:
            health = getattr(pl_module, "health_warnings", None)
            if health is not None and health.off_because is None:
                health.turn_off(HEALTH_CHECKS_OFF)
                if trainer.is_global_zero:
                    print(f"STAND-IN DATA: {HEALTH_CHECKS_OFF}.", file=sys.stderr)

        def on_test_epoch_end(self, trainer, pl_module) -> None:
            pl_module.log(STAND_IN_COLUMN, 1.0, sync_dist=True)

        def _write(self, trainer) -> None:
            folder = trainer.log_dir if trainer.logger is not None else None
            if (
                trainer.is_global_zero
                and not trainer.fast_dev_run
                and folder
                and Path(folder).is_dir()
            ):
                from ..safety.atomic_files import replaced_atomically

                manifest = read_manifest(root) or {"files": {}}
                files = "".join(f"{md5}  {name}\n" for name, md5 in manifest["files"].items())
                with replaced_atomically(Path(folder) / RUN_LABEL) as partial:  # never a link's
                    partial.write_text(
                        f"{STAND_IN_LABEL}.\nData root: {Path(root).resolve()}\n"
                        f"Files (md5):\n{files}"
                    )

        def teardown(self, trainer, pl_module, stage: str) -> None:
            self._write(trainer)
            if stage == "test" and trainer.is_global_zero:  # after the results tables
                print(f"STAND-IN DATA: the results above are on {root} ({STAND_IN_LABEL}).")

    return StandInDataLabel()


def use_stand_in_data(datamodule: Any, trainer: Any) -> bool:
    """When ``datamodule.root`` holds :data:`MANIFEST`: accept its files
    (:func:`accept_stand_in_files`), say so on the console and label the run
    (:func:`stand_in_label` added to ``trainer``'s callbacks). Returns whether it did."""
    root = getattr(datamodule, "root", None)
    if root is None or not (Path(root) / MANIFEST).is_file():
        return False
    accepted = accept_stand_in_files(root)
    print(
        f"STAND-IN DATA: {root} holds {len(accepted)} files of {STAND_IN_LABEL}; this run "
        f"folder is labelled {RUN_LABEL}.",
        file=sys.stderr,
    )
    if trainer is not None:
        trainer.callbacks.append(stand_in_label(root))
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """``signorm-standin-data DIR``: write the stand-ins and print how to run a recipe on them."""
    parser = argparse.ArgumentParser(
        prog="signorm-standin-data",
        description="Write stand-in CIFAR-10, CIFAR-100 and SVHN test files (random pixels, "
        "torchvision's on-disk format) under DIR, to smoke-test a CIFAR recipe in seconds "
        "without the data sets. Runs on them are labelled as such (console, run folder) and "
        "signorm-regression refuses them.",
    )
    parser.add_argument("root", metavar="DIR", help="folder to write (a new or empty one)")
    parser.add_argument("--seed", type=int, default=0, help="pixel seed (default 0)")
    args = parser.parse_args(argv)
    try:
        manifest = write_stand_in(args.root, args.seed)
    except (OSError, ValueError) as error:  # one line: no usage block above the reason
        print(f"{parser.prog}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    print(
        f"Wrote {len(read_manifest(args.root)['files'])} stand-in files and {manifest}.\n"
        "Run a CIFAR recipe on them (CPU, 2 training steps, then validation and the test of "
        "eval_after_fit on one batch each):\n"
        f"  torch-uncertainty fit --config RECIPE.yaml --data.init_args.root={args.root} "
        f"{' '.join(SMOKE_TEST_OVERRIDES)}\n"
        "plus the recipe's width override (experiments/README.md, 'On a laptop') for the "
        "WideResNet and ResNet recipes; TorchUncertainty's own recipes also take "
        "--data CIFAR10DataModule (or CIFAR100DataModule)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
