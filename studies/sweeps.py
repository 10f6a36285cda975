"""Sweeps of the paper's ablations: temperature τ, member count M, regularization strength λ.

Each point of a sweep is one ordinary training run that leaves TorchUncertainty's
``results.csv`` in its own folder, ``OUT/<sweep>/signorm_M<M>_tau<τ>_lambda<λ>/seed<S>/``
(``packed_M<M>`` for Packed); the figure commands
(:mod:`studies.figures`) read those files. Two back ends:

* ``--backend digits`` trains every point here, on CPU, with the comparison command's
  recipe (:mod:`studies.compare`: CIFAR-style ResNet-18 at 1/4 width on
  scikit-learn's digits, fixed splits, the seed only changing the initialisation and the
  batch order), and also saves each σN-Ens run's final importances
  (``importances.safetensors``) for the ownership figures;
* ``--backend recipe --config experiments/<recipe>.yaml`` prints one ``torch-uncertainty
  fit`` command per point, with the overrides that set τ, λ, M, the seed and the log
  folder (``--launch`` runs them one after the other instead)::

    python -m studies.sweeps tau --backend recipe \\
        --config experiments/wrn_c100_signorm.yaml --values 0.03 0.1 0.3 1 3 --seeds 0 1 2
    python -m studies.sweeps tau --backend digits \\
        --values 0.03 0.1 0.3 1 3 --seeds 0 1 2 --out runs/digits
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import subprocess
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from signorm_lab.reproduction.runs import RESULTS_FILENAME, SETTINGS_FILENAME
from torch_uncertainty_signorm.signorm.regularization import DEFAULT_DIVERSITY_STRENGTH, DEFAULT_TAU

from . import compare

__all__ = [
    "SWEEPS",
    "SweepPoint",
    "recipe_command",
    "run_digits_point",
    "sweep_points",
    "write_settings",
]

SIGNORM, PACKED = "signorm", "packed"
#: Sweep name -> the setting it varies.
SWEEPS = {"tau": "tau", "members": "num_estimators", "lambda": "diversity_strength"}
#: The paper's member-scaling grid (Appendix, member-scaling numbers).
MEMBER_COUNTS = (2, 4, 8, 12, 16)


@dataclass(frozen=True)
class SweepPoint:
    """One run of a sweep: the method and its σN-Ens settings (ignored by Packed)."""

    method: str
    num_estimators: int
    tau: float
    diversity_strength: float
    seed: int

    @property
    def name(self) -> str:
        if self.method == PACKED:  # no τ or λ
            return f"{self.method}_M{self.num_estimators}"
        return (
            f"{self.method}_M{self.num_estimators}_tau{self.tau:g}"
            f"_lambda{self.diversity_strength:g}"
        )

    def log_dir(self, out: Path, sweep: str) -> Path:
        return Path(out) / sweep / self.name / f"seed{self.seed}"


def sweep_points(
    sweep: str,
    values: Sequence[float],
    seeds: Sequence[int],
    *,
    tau: float = DEFAULT_TAU,
    diversity_strength: float = DEFAULT_DIVERSITY_STRENGTH,
    num_estimators: int = compare.DEFAULT_NUM_ESTIMATORS,
    with_packed: bool = False,
) -> list[SweepPoint]:
    """The runs of ``sweep`` (``tau``, ``members`` or ``lambda``) over ``values`` × ``seeds``.

    The other settings are fixed at ``tau``, ``diversity_strength`` and ``num_estimators``.
    ``with_packed`` adds a Packed-Ensembles run for each member count of a ``members`` sweep.

    Raises:
        ValueError: On an unknown sweep, an empty grid, or a non-integer member count.
    """
    if sweep not in SWEEPS:
        raise ValueError(f"sweep must be one of {sorted(SWEEPS)}, got {sweep!r}.")
    if not values or not seeds:
        raise ValueError(f"a sweep needs values and seeds, got values={values!r}, seeds={seeds!r}.")
    if sweep == "members" and any(int(v) != v or v < 1 for v in values):
        raise ValueError(f"member counts must be integers >= 1, got {list(values)!r}.")
    methods = [SIGNORM, PACKED] if with_packed and sweep == "members" else [SIGNORM]
    points = []
    for method in methods:
        for value in values:
            settings = {
                "tau": tau,
                "diversity_strength": diversity_strength,
                "num_estimators": num_estimators,
                SWEEPS[sweep]: value,
            }
            settings["num_estimators"] = int(settings["num_estimators"])
            points += [SweepPoint(method, seed=seed, **settings) for seed in seeds]
    return points


def _digits_routine(point: SweepPoint):
    if point.method == PACKED:
        return compare.baseline_routine(
            compare.packed_resnet(point.num_estimators), point.num_estimators, save_to_csv=True
        )
    return compare.signorm_routine(
        point.num_estimators,
        tau=point.tau,
        diversity_strength=point.diversity_strength,
        save_to_csv=True,
    )


def run_digits_point(
    point: SweepPoint, log_dir: str | Path, epochs: int = compare.DEFAULT_EPOCHS
) -> Path:
    """Train and test one point on digits (CPU); returns its ``results.csv``.

    Writes ``results.csv`` (TorchUncertainty's, plus the ``test/div/*`` columns of
    σN-Ens), ``settings.json`` and, for σN-Ens, the final importances σ(γ) per layer in
    ``importances.safetensors`` (metadata ``regularized``: the regularized layers).
    A point whose ``results.csv`` exists is not run again.

    Raises:
        ValueError: If Packed-Ensembles cannot be built with ``num_estimators`` at this width.
    """
    from lightning.pytorch import seed_everything
    from lightning.pytorch.loggers import CSVLogger
    from safetensors.torch import save_file
    from torch_uncertainty.utils import TUTrainer

    from signorm_lab.callbacks import ResultsCSVCallback
    from signorm_lab.datamodules import DigitsDataModule
    from signorm_lab.safety.files import follow_umask

    log_dir = Path(log_dir)
    if (log_dir / RESULTS_FILENAME).is_file():
        return log_dir / RESULTS_FILENAME
    if point.method == PACKED:
        compare.check_num_estimators(point.num_estimators)
    seed_everything(point.seed, verbose=False)
    routine = _digits_routine(point)
    logger = CSVLogger(log_dir.parent, name="", version=log_dir.name)
    trainer = TUTrainer(
        accelerator="cpu",
        max_epochs=epochs,
        limit_val_batches=0,
        logger=logger,
        callbacks=[ResultsCSVCallback()],  # the test/div/* columns beside TorchUncertainty's
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    # Fixed splits and OOD permutation (seed 0): across seeds only the training varies.
    datamodule = DigitsDataModule(batch_size=compare.BATCH_SIZE, eval_ood=True, seed=0)
    quiet = logging.getLogger("lightning.pytorch")
    level, quiet.level = quiet.level, logging.WARNING
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer.fit(routine, datamodule)
            trainer.test(routine, datamodule, verbose=False)
    finally:
        quiet.setLevel(level)
    write_settings(
        point, log_dir, epochs=epochs, test_batch_size=compare.BATCH_SIZE, dataset="digits"
    )
    if point.method == SIGNORM:
        model = routine.model
        layers = {
            n: layer.importance().detach().float().contiguous()
            for n, layer in model.signorm_layers().items()
        }
        save_file(
            layers,
            log_dir / "importances.safetensors",
            metadata={"regularized": json.dumps(list(model.regularized_layer_names))},
        )
        follow_umask(log_dir / "importances.safetensors")  # safetensors writes 0600
    return log_dir / RESULTS_FILENAME


def write_settings(point: SweepPoint, log_dir: str | Path, **extra) -> None:
    """Record a point's settings in ``log_dir/settings.json`` (read by the figure commands)."""
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / SETTINGS_FILENAME).write_text(json.dumps(asdict(point) | extra, indent=1))


def recipe_command(point: SweepPoint, config: str | Path, out: str | Path, sweep: str) -> list[str]:
    """The ``torch-uncertainty fit`` command of one point of a recipe sweep.

    Overrides τ, λ and M (model and ``RepeatTarget``) of a σN-Ens recipe, or M of a
    Packed recipe, the seed, ``save_to_csv`` and the logger folder
    (``OUT/<sweep>/<point>/seed<S>``, where the saved ``config.yaml`` records the settings).
    """
    log_dir = point.log_dir(Path(out), sweep)
    model = "--routine.init_args.model.init_args"
    command = [
        "torch-uncertainty",
        "fit",
        "--config",
        str(config),
        f"--seed_everything={point.seed}",
        "--routine.init_args.save_to_csv=true",
        f"--trainer.logger.init_args.save_dir={log_dir.parent.parent}",
        f"--trainer.logger.init_args.name={log_dir.parent.name}",
        f"--trainer.logger.init_args.version={log_dir.name}",
        f"{model}.num_estimators={point.num_estimators}",
    ]
    if point.method != SIGNORM:  # σN-Ens recipes take M from the model alone
        command.append(
            f"--routine.init_args.format_batch_fn.init_args.num_repeats={point.num_estimators}"
        )
    if point.method == SIGNORM:
        command += [
            f"{model}.tau={point.tau:g}",
            f"{model}.diversity_strength={point.diversity_strength:g}",
        ]
    return command


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m studies.sweeps",
        description="Run (digits, CPU) or print/launch (any recipe) a τ, M or λ sweep.",
    )
    parser.add_argument("sweep", choices=sorted(SWEEPS), help="the setting to vary")
    parser.add_argument(
        "--values", type=float, nargs="+", required=True, help="swept values (τ, M or λ)"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--backend", choices=["digits", "recipe"], default="digits")
    parser.add_argument("--config", help="recipe of --backend recipe (a σN-Ens recipe)")
    parser.add_argument(
        "--packed-config", help="members sweep, recipe back end: also sweep this Packed recipe"
    )
    parser.add_argument(
        "--with-packed",
        action="store_true",
        help="members sweep, digits back end: also run Packed-Ensembles",
    )
    parser.add_argument("--tau", type=float, default=DEFAULT_TAU, help="τ when not swept")
    parser.add_argument(
        "--lambda",
        dest="diversity_strength",
        type=float,
        default=DEFAULT_DIVERSITY_STRENGTH,
        help="λ when not swept",
    )
    parser.add_argument(
        "--num-estimators",
        type=int,
        default=compare.DEFAULT_NUM_ESTIMATORS,
        help="M when not swept",
    )
    parser.add_argument(
        "--epochs",
        type=int,
        default=compare.DEFAULT_EPOCHS,
        help="digits back end: training epochs",
    )
    parser.add_argument("--out", default="runs", help="root folder of the runs")
    parser.add_argument(
        "--launch",
        action="store_true",
        help="recipe back end: run the commands instead of printing them",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="digits back end: torch intra-op threads (default 1: 8x8 inputs "
        "gain nothing from more)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> list[SweepPoint]:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.backend == "recipe" and not args.config:
        parser.error("--backend recipe needs --config (the σN-Ens recipe to sweep)")
    with_packed = args.with_packed or bool(args.packed_config)
    try:
        points = sweep_points(
            args.sweep,
            args.values,
            args.seeds,
            tau=args.tau,
            diversity_strength=args.diversity_strength,
            num_estimators=args.num_estimators,
            with_packed=with_packed,
        )
    except ValueError as error:
        parser.error(str(error))
    if args.backend == "digits":
        import torch

        torch.set_num_threads(args.threads)
    for point in points:
        if args.backend == "digits":
            if point.method == PACKED:
                try:
                    compare.check_num_estimators(point.num_estimators)
                except ValueError as error:
                    print(f"skipped {point.name} seed {point.seed}: {error}")
                    continue
            path = run_digits_point(point, point.log_dir(Path(args.out), args.sweep), args.epochs)
            print(f"{point.name} seed {point.seed}: {path}", flush=True)
            continue
        config = args.packed_config if point.method == PACKED else args.config
        command = recipe_command(point, config, args.out, args.sweep)
        write_settings(point, point.log_dir(Path(args.out), args.sweep), recipe=str(config))
        if args.launch:
            subprocess.run(command, check=True)
        else:
            print(shlex.join(command))
    return points


if __name__ == "__main__":
    main()
