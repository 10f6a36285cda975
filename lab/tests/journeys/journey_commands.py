"""Command lines of the journeys: a recipe of ``experiments/`` at 1/8 width on CPU, tiny data."""

from __future__ import annotations

import csv
from pathlib import Path

EXPERIMENTS = Path(__file__).resolve().parents[3] / "experiments"
#: Where the width multiplier of TorchUncertainty's ResNet sits: in a plain recipe's model block,
#: or in the ``model`` that ``signorm_ensemble`` wraps.
PLAIN_WIDTH = "--routine.init_args.model.init_args.width_multiplier=0.125"
ENSEMBLE_WIDTH = "--routine.init_args.model.init_args.model.init_args.width_multiplier=0.125"


def tiny_args(
    data_root: Path,
    log_dir: Path,
    width: str = ENSEMBLE_WIDTH,
    batch_size: int = 8,
    devices: int = 1,
) -> list[str]:
    """Overrides shrinking a CIFAR recipe to seconds: 1/8 width, float32 on CPU, batches of
    ``batch_size``, one epoch of two steps, logs and checkpoints under ``log_dir``, no sanity
    check (the interruption journey walks it).

    Each evaluation of a model this small, whose outputs barely vary over inputs, costs seconds
    on one CPU thread in TorchUncertainty's ``SmoothCalibrationError`` (its bandwidth search ends
    convolving a grid of 10,001 points): the sanity check was one of three per run."""
    return [
        width,
        "--seed_everything=0",
        f"--data.init_args.root={data_root}",
        f"--data.init_args.batch_size={batch_size}",
        "--data.init_args.num_workers=0",
        "--data.init_args.persistent_workers=false",
        "--trainer.accelerator=cpu",
        f"--trainer.devices={devices}",
        "--trainer.precision=32",
        "--trainer.max_epochs=1",
        "--trainer.limit_train_batches=2",
        "--trainer.limit_val_batches=1",
        "--trainer.enable_progress_bar=false",
        "--trainer.num_sanity_val_steps=0",
        f"--trainer.logger.init_args.save_dir={log_dir}",
        f"--trainer.default_root_dir={log_dir}",
    ]


def failure(done) -> str:
    """The command line and the end of its output, for assertion messages."""
    return (
        f"{' '.join(map(str, done.args))}\n--- stdout\n{done.stdout[-3000:]}\n"
        f"--- stderr\n{done.stderr[-6000:]}"
    )


def only(paths, what: str) -> Path:
    """The single element of ``paths``, or an assertion naming ``what`` and what was found."""
    paths = sorted(paths)
    assert len(paths) == 1, f"expected one {what}, found {[str(p) for p in paths]}"
    return paths[0]


def results_row(log_dir: Path) -> dict[str, float]:
    """The last row of the single ``results.csv`` under ``log_dir``, as floats."""
    with only(log_dir.rglob("results.csv"), "results.csv").open() as file:
        row = list(csv.DictReader(file))[-1]
    return {key: float(value) for key, value in row.items()}


def best_checkpoint(run_dir: Path) -> Path:
    """The best-accuracy checkpoint :class:`~torch_uncertainty.callbacks.TUClsCheckpoint`
    saved under ``run_dir`` (the one ``--eval_after_fit`` tests)."""
    return only(run_dir.rglob("*val_acc=*.ckpt"), "best-accuracy checkpoint")
