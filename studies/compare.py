"""Compare σN-Ens with TorchUncertainty's Single model, Deep Ensembles and Packed-Ensembles.

Every method trains on the same scikit-learn ``digits`` splits (:class:`DigitsDataModule`,
pixel-permuted digits as the OOD set) with the same recipe: TorchUncertainty's CIFAR-style
ResNet-18 at width 1/4 (16-32-64-128 channels, which fits 1×8×8 inputs), SGD (lr 0.05,
momentum 0.9, weight decay 5e-4), batch size 64 and the same number of epochs. The metrics
are TorchUncertainty's own test metrics (``trainer.test``)::

    python -m studies.compare [--epochs N] [--seed S] \\
        [--num-estimators M] [--output results.csv]

Packed-Ensembles use alpha=2, gamma=1 (TorchUncertainty's ``packed_resnet`` defaults): at
this width TorchUncertainty would silently lower any larger gamma back to 1, since its
packed convolutions keep at least 64 channels per group.
"""

from __future__ import annotations

import argparse
import csv
import logging
import time
import warnings
from collections.abc import Callable, Sequence

import torch
from lightning.pytorch import seed_everything
from torch import nn
from torch_uncertainty.methods import deep_ensembles
from torch_uncertainty.models import classification as tu_models
from torch_uncertainty.routines import ClassificationRoutine
from torch_uncertainty.transforms import RepeatTarget
from torch_uncertainty.utils import TUTrainer

from signorm_lab.datamodules import DigitsDataModule
from signorm_lab.reproduction.tables import format_table
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine
from torch_uncertainty_signorm.signorm.ensemble import signorm_ensemble
from torch_uncertainty_signorm.signorm.regularization import DEFAULT_DIVERSITY_STRENGTH, DEFAULT_TAU

__all__ = [
    "baseline_routine",
    "check_num_estimators",
    "compare",
    "comparison_table",
    "main",
    "packed_resnet",
    "signorm_routine",
]

NUM_CLASSES = 10
WIDTH = 0.25  # CIFAR-style ResNet-18 at 1/4 width: 16-32-64-128 channels
LR, MOMENTUM, WEIGHT_DECAY, BATCH_SIZE = 0.05, 0.9, 5e-4, 64
PACKED_ALPHA, PACKED_GAMMA = 2, 1
DEFAULT_EPOCHS, DEFAULT_NUM_ESTIMATORS = 4, 4


def _resnet() -> nn.Module:
    return tu_models.resnet(1, NUM_CLASSES, 18, style="cifar", width_multiplier=WIDTH)


def _sgd(params) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)


def baseline_routine(
    model: nn.Module, num_estimators: int = 1, **routine_kwargs
) -> ClassificationRoutine:
    """TorchUncertainty's routine around ``model`` with the shared recipe (SGD, OOD on).

    ``model`` returns ``num_estimators`` members' logits stacked member-major (``(M·B, C)``),
    so an ensemble when ``num_estimators > 1``; ``routine_kwargs`` extend the routine's
    arguments (e.g. ``save_to_csv``).
    """
    ensemble = num_estimators > 1
    return ClassificationRoutine(
        model,
        NUM_CLASSES,
        nn.CrossEntropyLoss(),
        is_ensemble=ensemble,
        format_batch_fn=RepeatTarget(num_repeats=num_estimators) if ensemble else None,
        optim_recipe=lambda m: _sgd(m.parameters()),
        eval_ood=True,
        **routine_kwargs,
    )


def _single(num_estimators: int) -> ClassificationRoutine:
    return baseline_routine(_resnet())


def _deep_ensembles(num_estimators: int) -> ClassificationRoutine:
    model = deep_ensembles(_resnet(), num_estimators=num_estimators)  # re-initialises each copy
    return baseline_routine(model, num_estimators)


def packed_resnet(num_estimators: int) -> nn.Module:
    """The Packed-Ensembles row's backbone: TorchUncertainty's packed ResNet-18 at this width.

    Raises:
        ValueError: If ``num_estimators`` does not divide the packed stem's channels
            (:func:`check_num_estimators` says so in the comparison's terms).
    """
    return tu_models.packed_resnet(
        1,
        NUM_CLASSES,
        18,
        num_estimators,
        alpha=PACKED_ALPHA,
        gamma=PACKED_GAMMA,
        style="cifar",
        width_multiplier=WIDTH,
    )


def _packed(num_estimators: int) -> ClassificationRoutine:
    return baseline_routine(packed_resnet(num_estimators), num_estimators)


def signorm_routine(
    num_estimators: int = DEFAULT_NUM_ESTIMATORS,
    tau: float = DEFAULT_TAU,
    diversity_strength: float = DEFAULT_DIVERSITY_STRENGTH,
    **routine_kwargs,
) -> SigmaNormClassificationRoutine:
    """The σN-Ens row: the shared backbone and recipe, scale logits at 100× lr, OOD on.

    ``routine_kwargs`` override or extend the routine's arguments (e.g. ``save_to_csv``).
    """
    model = signorm_ensemble(
        _resnet(),
        num_estimators,
        regularized_layers="resnet18",
        tau=tau,
        diversity_strength=diversity_strength,
    )
    return SigmaNormClassificationRoutine(
        model,
        NUM_CLASSES,
        nn.CrossEntropyLoss(),
        **{
            "optim_recipe": lambda m: _sgd(m.parameters()),  # on the routine's σN-Ens groups
            "eval_ood": True,
            **routine_kwargs,
        },
    )


#: Method name -> routine builder taking the number of estimators.
METHODS: dict[str, Callable[[int], ClassificationRoutine]] = {
    "Single": _single,
    "Deep Ensembles": _deep_ensembles,
    "Packed Ensembles": _packed,
    "σN-Ens": signorm_routine,
}

#: (row key, column title, TorchUncertainty test metric, scale, format) of the table.
COLUMNS = (
    ("acc", "Acc (%)", "test/cls/Acc", 100, ".1f"),
    ("nll", "NLL", "test/cls/NLL", 1, ".3f"),
    ("ece", "ECE (%)", "test/cal/ECE", 100, ".2f"),
    ("auroc", "AUROC (%)", "ood/AUROC", 100, ".1f"),
)


def _run(name: str, epochs: int, seed: int, num_estimators: int) -> dict:
    seed_everything(seed, verbose=False)
    start = time.perf_counter()
    routine = METHODS[name](num_estimators)
    trainer = TUTrainer(
        accelerator="cpu",
        max_epochs=epochs,
        limit_val_batches=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    datamodule = DigitsDataModule(batch_size=BATCH_SIZE, eval_ood=True, seed=seed)
    trainer.fit(routine, datamodule)
    metrics = trainer.test(routine, datamodule, verbose=False)[0]
    row = {"method": name}
    row |= {key: float(metrics[metric]) for key, _, metric, _, _ in COLUMNS}
    row["params"] = int(routine.num_params)
    row["time_s"] = time.perf_counter() - start
    return row


def check_num_estimators(num_estimators: int) -> None:
    """Raise a ValueError naming ``num_estimators`` unless every method can be built with it."""
    if type(num_estimators) is not int or num_estimators < 2:
        raise ValueError(f"num_estimators must be an integer >= 2, got {num_estimators!r}.")
    try:
        packed_resnet(num_estimators)  # Packed-Ensembles split the channels into M groups
    except ValueError as error:
        raise ValueError(
            f"num_estimators={num_estimators}: Packed-Ensembles at width {WIDTH} need M to "
            f"divide their {int(64 * WIDTH * PACKED_ALPHA)} stem channels ({error})"
        ) from None


def compare(
    epochs: int = DEFAULT_EPOCHS, seed: int = 0, num_estimators: int = DEFAULT_NUM_ESTIMATORS
) -> list[dict]:
    """Train and test every method; one row per method.

    Rows hold ``method``, ``acc``, ``nll``, ``ece``, ``auroc`` (fractions, as
    TorchUncertainty computes them), ``params`` and ``time_s`` (train and test wall time).
    """
    if type(epochs) is not int or epochs < 1:
        raise ValueError(f"epochs must be an integer >= 1, got {epochs!r}.")
    check_num_estimators(num_estimators)
    lightning_logger = logging.getLogger("lightning.pytorch")
    level = lightning_logger.level
    lightning_logger.setLevel(logging.WARNING)  # no "GPU available: False" banners
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module="lightning")  # CPU and dataloader hints
            warnings.filterwarnings("ignore", message="Metric `FPR95` will save")
            return [_run(name, epochs, seed, num_estimators) for name in METHODS]
    finally:
        lightning_logger.setLevel(level)


def comparison_table(rows: Sequence[dict]) -> str:
    """The rows of :func:`compare` as aligned text, in the paper's units."""
    header = ["Method", *(title for _, title, _, _, _ in COLUMNS), "Params", "Time (s)"]
    body = [
        [
            row["method"],
            *(f"{row[key] * scale:{fmt}}" for key, _, _, scale, fmt in COLUMNS),
            f"{row['params']:,}",
            f"{row['time_s']:.1f}",
        ]
        for row in rows
    ]
    return format_table(header, body)


def _int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer >= {minimum}, got {text!r}"
            ) from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    return parse


def main(argv: Sequence[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(
        prog="python -m studies.compare",
        description="Single vs Deep Ensembles vs Packed-Ensembles vs σN-Ens on digits (CPU).",
    )
    parser.add_argument(
        "--epochs",
        type=_int_at_least(1),
        default=DEFAULT_EPOCHS,
        help=f"training epochs of every method (default {DEFAULT_EPOCHS})",
    )
    parser.add_argument(
        "--seed",
        type=_int_at_least(0),
        default=0,
        help="seed of the splits and of every initialisation (default 0)",
    )
    parser.add_argument(
        "--num-estimators",
        type=_int_at_least(2),
        default=DEFAULT_NUM_ESTIMATORS,
        help=f"ensemble members M (default {DEFAULT_NUM_ESTIMATORS})",
    )
    parser.add_argument("--output", help="also write the rows to this CSV file")
    parser.add_argument(
        "--threads",
        type=_int_at_least(1),
        default=1,
        help="torch intra-op threads (default 1: these 8x8 tensors are too "
        "small to gain from more, and more thrash on a busy CPU)",
    )
    args = parser.parse_args(argv)

    try:
        check_num_estimators(args.num_estimators)
    except ValueError as error:
        parser.error(f"argument --num-estimators: {error}")
    torch.set_num_threads(args.threads)

    start = time.perf_counter()
    rows = compare(args.epochs, args.seed, args.num_estimators)
    print(
        f"\ndigits (1x8x8, OOD: pixel-permuted), ResNet-18 x{WIDTH}, "
        f"{args.epochs} epochs, M={args.num_estimators}, seed {args.seed}"
    )
    print(comparison_table(rows), end="")
    print(f"Total wall time: {time.perf_counter() - start:.1f} s")
    if args.output:
        with open(args.output, "w", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return rows


if __name__ == "__main__":
    main()
