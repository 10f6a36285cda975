"""The digits study: pre-registered tests of the paper's claims on a CPU-sized, unsaturated task.

Every run is the ``torch-uncertainty fit`` command on one of the ``experiments/digits_study_*``
recipes (scikit-learn's 8x8 digits with sensor noise, digits 0-7 in distribution, 8 and 9 held
out as near OOD, noise / blur / translation at five severities; a CIFAR-style ResNet-18 at 1/4
width trained to convergence), with the run's settings as command-line overrides, in its own
folder ``runs/<run>/seed<S>/``: TorchUncertainty's ``results.csv``, the saved ``config.yaml``, a
``settings.json``, the training trajectory ``trajectory.csv`` (from Lightning's ``metrics.csv``)
and, for the methods comparison, the test and near-OOD member probabilities. Runs already
present are kept; the tables, figures and tests are drawn from the kept files alone
(``--figures-only``)::

    python -m studies.digits_study --out studies/results/digits_study

The grid (:func:`study_runs`, design and pre-registered outcomes in
``studies/results/digits_study``):

* ``tau``: σN-Ens, M = 4, λ = 10⁻², τ ∈ :data:`TAUS` × seeds 0-2 (τ = 0.1: 0-4), and
  λ = 0 × seeds 0-2;
* ``lambda``: σN-Ens, M = 4, λ ∈ :data:`LAMBDAS` × τ ∈ :data:`LAMBDA_TAUS` × seeds 0-2 (its
  diagonals hold λ/τ² fixed);
* ``members``: σN-Ens at τ = 0.5 (the paper's) and Packed-Ensembles, M ∈ :data:`MEMBERS` ×
  seeds 0-2;
* ``methods``: the single model and Deep Ensembles (M = 4) × seeds 0-4, against the ``tau``
  part's σN-Ens at τ = 0.1 (the paper's from-scratch setting).

One learning-rate rule for every method: the loss averages over the M·B rows of M members, so
each member's own parameters get 1/M of a single model's gradient; they train at M × the base
rate (σN-Ens: ``member_lr_multiplier = M``; Deep Ensembles and Packed: ``lr × M``), with the
weight decay divided by M. The regularizer's strength is not averaged over members, so the
member sweep scales λ by 4/M: its task-to-regularizer balance per member is that of M = 4.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from signorm_lab.reproduction.runs import RESULTS_FILENAME, SETTINGS_FILENAME

from ._command import study_command, train_runs
from .digits_design import (  # noqa: F401  (the design, also read from here)
    EXPERIMENTS,
    FEW_SEEDS,
    LABELS,
    LAMBDA,
    LAMBDA_TAUS,
    LAMBDAS,
    LR,
    MEMBERS,
    MEMBERS_TAU,
    NUM_ESTIMATORS,
    PARTS,
    PREDICTIONS,
    RECIPES,
    SEEDS,
    TAU,
    TAUS,
    TRAJECTORY,
    TRAJECTORY_COLUMNS,
    WEIGHT_DECAY,
)

__all__ = [
    "LAMBDAS",
    "LAMBDA_TAUS",
    "MEMBERS",
    "PARTS",
    "TAUS",
    "StudyRun",
    "main",
    "record_run",
    "run_study",
    "study_runs",
    "write_trajectory",
]


@dataclass(frozen=True)
class StudyRun:
    """One training run: the recipe and the settings the command overrides."""

    method: str
    seed: int
    num_estimators: int = NUM_ESTIMATORS
    tau: float | None = None
    diversity_strength: float | None = None

    def __post_init__(self) -> None:
        if self.method not in RECIPES:
            raise ValueError(f"method must be one of {sorted(RECIPES)}, got {self.method!r}.")
        if self.method == "signorm" and (self.tau is None or self.diversity_strength is None):
            raise ValueError("a σN-Ens run needs tau and diversity_strength.")

    @property
    def name(self) -> str:
        if self.method == "signorm":
            return (
                f"signorm_M{self.num_estimators}_tau{self.tau:g}_lambda{self.diversity_strength:g}"
            )
        if self.method == "single":
            return "single"
        return f"{self.method}_M{self.num_estimators}"

    @property
    def saves_predictions(self) -> bool:
        """The methods comparison's runs keep their test and near-OOD member probabilities."""
        if self.method == "signorm":
            return (self.num_estimators, self.tau, self.diversity_strength) == (
                NUM_ESTIMATORS,
                TAU,
                LAMBDA,
            )
        return self.num_estimators in (1, NUM_ESTIMATORS)

    def log_dir(self, runs_dir: Path) -> Path:
        return Path(runs_dir) / self.name / f"seed{self.seed}"

    def command(self, runs_dir: Path) -> list[str]:
        """The ``torch-uncertainty fit`` command of this run."""
        log_dir = self.log_dir(runs_dir)
        members = self.num_estimators
        command = [
            "torch-uncertainty",
            "fit",
            "--config",
            str(EXPERIMENTS / RECIPES[self.method]),
            f"--seed_everything={self.seed}",
            f"--trainer.logger.init_args.save_dir={log_dir.parent.parent}",
            f"--trainer.logger.init_args.name={log_dir.parent.name}",
            f"--trainer.logger.init_args.version={log_dir.name}",
        ]
        model = "--routine.init_args.model.init_args"
        if self.method == "signorm":
            command += [
                f"{model}.num_estimators={members}",
                f"{model}.tau={self.tau:g}",
                f"{model}.diversity_strength={self.diversity_strength:g}",
                f"--routine.init_args.member_lr_multiplier={members}",
            ]
        elif self.method == "packed":
            command += [
                f"{model}.num_estimators={members}",
                f"--routine.init_args.format_batch_fn.init_args.num_repeats={members}",
                f"--optimizer.init_args.lr={LR * members:g}",
                f"--optimizer.init_args.weight_decay={WEIGHT_DECAY / members:g}",
            ]
        if self.saves_predictions:
            command += [
                ("--trainer.callbacks+=signorm_lab.callbacks.TestPredictionWriter"),
                "--trainer.callbacks.dataloaders=[0, 1]",
            ]
        return command


def study_runs(parts: Sequence[str] = PARTS) -> list[StudyRun]:
    """Every run of the ``parts`` of the grid, each once (parts share runs)."""
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise ValueError(f"parts must be among {list(PARTS)}, got {unknown}.")
    runs: list[StudyRun] = []
    if "tau" in parts:
        runs += [
            StudyRun("signorm", s, tau=t, diversity_strength=LAMBDA)
            for t in TAUS
            for s in (SEEDS if t == TAU else FEW_SEEDS)
        ]
        runs += [StudyRun("signorm", s, tau=1.0, diversity_strength=0.0) for s in FEW_SEEDS]
    if "lambda" in parts:
        runs += [
            StudyRun("signorm", s, tau=t, diversity_strength=lam)
            for lam in LAMBDAS
            for t in LAMBDA_TAUS
            for s in FEW_SEEDS
        ]
    if "members" in parts:
        runs += [
            StudyRun(
                "signorm",
                s,
                num_estimators=m,
                tau=MEMBERS_TAU,
                diversity_strength=LAMBDA * NUM_ESTIMATORS / m,
            )
            for m in MEMBERS
            for s in FEW_SEEDS
        ]
        runs += [StudyRun("packed", s, num_estimators=m) for m in MEMBERS for s in FEW_SEEDS]
    if "methods" in parts:
        runs += [StudyRun("single", s, num_estimators=1) for s in SEEDS]
        runs += [StudyRun("deep_ensembles", s) for s in SEEDS]
        runs += [StudyRun("signorm", s, tau=TAU, diversity_strength=LAMBDA) for s in SEEDS]
    return list(dict.fromkeys(runs))


def write_trajectory(log_dir: Path) -> Path:
    """Keep the study's columns of Lightning's ``metrics.csv`` in ``trajectory.csv``."""
    with (log_dir / "metrics.csv").open(newline="") as file:
        rows = list(csv.DictReader(file))
    columns = [c for c in TRAJECTORY_COLUMNS if rows and c in rows[0]]
    kept = [
        {c: row[c] for c in columns}
        for row in rows
        if any(row[c] not in ("", None) for c in columns if c not in ("step", "epoch"))
    ]
    with (log_dir / TRAJECTORY).open("w", newline="") as file:
        writer = csv.DictWriter(file, columns)
        writer.writeheader()
        writer.writerows(kept)
    return log_dir / TRAJECTORY


def record_run(run: StudyRun, log_dir: Path, seconds: float) -> None:
    """Write a finished run's ``trajectory.csv`` and ``settings.json`` (its settings and time)."""
    write_trajectory(log_dir)
    settings = dataclasses.asdict(run) | {"run_seconds": round(seconds, 1)}
    (log_dir / SETTINGS_FILENAME).write_text(json.dumps(settings, indent=1))


def run_study(runs_dir: Path, jobs: int = 2, parts: Sequence[str] = PARTS) -> None:
    """Train (or keep) every run of ``parts``, ``jobs`` one-thread commands at a time, part by
    part in the order methods, τ, λ, members (each claim's runs complete together)."""
    order = ("methods", "tau", "lambda", "members")
    runs = list(dict.fromkeys(r for part in order if part in parts for r in study_runs([part])))
    train_runs(
        runs,
        runs_dir,
        jobs,
        record=record_run,
        kept=lambda log_dir: (
            (log_dir / RESULTS_FILENAME).is_file() and (log_dir / SETTINGS_FILENAME).is_file()
        ),
    )


def main(argv: Sequence[str] | None = None) -> str:
    """``python -m studies.digits_study``: train the runs, then write the tables and figures."""
    from .digits_analysis import write_artefacts

    return study_command(
        argv,
        prog="python -m studies.digits_study",
        description="Train the digits study's runs on CPU and write its tables, figures and tests.",
        out="studies/results/digits_study",
        parts=PARTS,
        run_study=run_study,
        write_artefacts=write_artefacts,
    )


if __name__ == "__main__":
    main()
