"""The tweets study's registered comparisons re-read with the training seed as the unit.

``studies.tweets_controlled`` averages each tweet's values over the seeds of a method and then
bootstraps tweets: its intervals leave out the between-seed variance, which dominates here, and
its near-OOD AUROCs are those of seed-averaged scores, which no trained model produces. This
module reads the same kept runs (``studies/results/tweets_study/controlled/runs``) run by run:
paired-by-seed t intervals of the test NLL and accuracy, per-run near-OOD AUROC (maximum softmax
probability and mutual information), Spearman ρ(τ, regularized σNorm-cos) with its ties, the
comparisons without the collapsed runs, and how long the seed-0 runs at the three τ stay one path::

    python -m studies.tweets_seed_level --out studies/results/tweets_study/controlled

It writes ``seed_level.csv`` and prints it; nothing is trained.
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path

import numpy as np
from safetensors.torch import load_file
from sklearn.metrics import roc_auc_score

from torch_uncertainty_signorm.evaluation.diversity import mutual_information

from .stats import mean_interval, paired_difference, spearman_p

METHODS = {
    "σN-Ens": "signorm_M4_tau0.08",
    "σN-Ens M=1": "signorm_M1_tau0.08",
    "Deep Ensembles": "deep_ensembles_M4",
    "Single": "single",
}
TAU_RUNS = {0.04: "signorm_M4_tau0.04", 0.08: "signorm_M4_tau0.08", 0.16: "signorm_M4_tau0.16"}
COLLAPSED_ACC = 0.4820  # every test tweet predicted as the majority class


def _results(folder: Path) -> dict[str, float]:
    with (folder / "results.csv").open(newline="") as file:
        return {k: float(v) for k, v in list(csv.DictReader(file))[-1].items() if v != ""}


def _per_run_auroc(folder: Path) -> dict[str, float]:
    saved = load_file(folder / "test_predictions.safetensors")
    id_probs, near = saved["probs/0"].double(), saved["probs/1"].double()
    labels = np.r_[np.zeros(id_probs.shape[1]), np.ones(near.shape[1])]
    row = {}
    for name, score in {
        "MSP": lambda p: -p.mean(0).max(-1).values,
        "MI": mutual_information,
    }.items():
        values = np.r_[score(id_probs).numpy(), score(near).numpy()]
        row[name] = 100 * float(roc_auc_score(labels, values)) if np.ptp(values) > 0 else math.nan
    return row


def shared_until(
    folders: list[Path], column: str, equal: bool = True, threshold: float = 0.999
) -> int | None:
    """The last logged step up to which, in every run, ``column`` is equal across the runs
    (``equal``) or at least ``threshold`` (``None``: not even at the first step)."""
    logs = []
    for folder in folders:
        with (folder / "trajectory.csv").open(newline="") as file:
            logs.append(
                {int(r["step"]): float(r[column]) for r in csv.DictReader(file) if r.get(column)}
            )
    last = None
    for step in sorted(set.intersection(*(set(log) for log in logs))):
        values = [log[step] for log in logs]
        if (len(set(values)) > 1) if equal else min(values) < threshold:
            break
        last = step
    return last


def _row(name: str, summary: dict, unit: str, seeds) -> dict:
    return {
        "comparison": name,
        "unit": unit,
        "mean": summary["mean"],
        "low": summary["low"],
        "high": summary["high"],
        "p": summary.get("p", math.nan),
        "seeds": " ".join(map(str, seeds)),
    }


def seed_level(runs_dir: Path) -> list[dict]:
    runs_dir = Path(runs_dir)
    results = {
        m: {int(f.name[4:]): _results(f) for f in sorted((runs_dir / d).glob("seed*"))}
        for m, d in METHODS.items()
    }
    rows = []
    for m, by_seed in results.items():
        for metric, column, scale in (("NLL", "test/cls/NLL", 1), ("Acc", "test/cls/Acc", 100)):
            s = mean_interval([r[column] * scale for r in by_seed.values()])
            rows.append(
                _row(f"{metric} {m}", s, "nats" if metric == "NLL" else "%", sorted(by_seed))
            )
        if (runs_dir / METHODS[m] / "seed0" / "test_predictions.safetensors").is_file():
            aurocs = [_per_run_auroc(runs_dir / METHODS[m] / f"seed{s}") for s in sorted(by_seed)]
            for score in ("MSP", "MI"):
                values = [a[score] for a in aurocs]
                if (all(math.isfinite(v) for v in values) and m != "Single") or score == "MSP":
                    rows.append(
                        _row(
                            f"near-OOD AUROC ({score}) {m}, per run",
                            mean_interval(values),
                            "points",
                            sorted(by_seed),
                        )
                    )
    for a, b in (
        ("σN-Ens", "σN-Ens M=1"),
        ("σN-Ens", "Deep Ensembles"),
        ("σN-Ens", "Single"),
        ("σN-Ens M=1", "Single"),
        ("Deep Ensembles", "Single"),
    ):
        seeds = sorted(set(results[a]) & set(results[b]))
        for metric, column, scale in (("NLL", "test/cls/NLL", 1), ("Acc", "test/cls/Acc", 100)):
            s = paired_difference(
                [results[a][k][column] * scale for k in seeds],
                [results[b][k][column] * scale for k in seeds],
            )
            rows.append(
                _row(
                    f"{metric} {a} − {b}, paired by seed",
                    s,
                    "nats" if metric == "NLL" else "points",
                    seeds,
                )
            )
        kept = [
            k
            for k in seeds
            if results[a][k]["test/cls/Acc"] != COLLAPSED_ACC
            and results[b][k]["test/cls/Acc"] != COLLAPSED_ACC
        ]
        if 0 < len(kept) < len(seeds):
            x = [results[a][k]["test/cls/NLL"] for k in kept]
            y = [results[b][k]["test/cls/NLL"] for k in kept]
            s = (
                paired_difference(x, y)
                if len(kept) > 1
                else {"mean": x[0] - y[0], "low": math.nan, "high": math.nan}
            )
            rows.append(
                _row(f"NLL {a} − {b}, paired by seed, without collapsed runs", s, "nats", kept)
            )
            unpaired = [results[b][k]["test/cls/NLL"] for k in seeds]
            rows.append(
                _row(
                    f"NLL {a} (without collapsed runs) − {b} (all seeds), means",
                    {
                        "mean": float(np.mean(x) - np.mean(unpaired)),
                        "low": math.nan,
                        "high": math.nan,
                    },
                    "nats",
                    kept,
                )
            )
    for a, b in (("σN-Ens", "Deep Ensembles"),):
        seeds = sorted(set(results[a]) & set(results[b]))
        per_run = {
            m: [_per_run_auroc(runs_dir / METHODS[m] / f"seed{k}") for k in seeds] for m in (a, b)
        }
        for score in ("MSP", "MI"):
            s = paired_difference([r[score] for r in per_run[a]], [r[score] for r in per_run[b]])
            rows.append(
                _row(
                    f"near-OOD AUROC ({score}) {a} − {b}, per run, paired by seed",
                    s,
                    "points",
                    seeds,
                )
            )
    for tau, d in TAU_RUNS.items():
        for label, keep in (
            ("all runs", lambda r: True),
            ("without collapsed runs", lambda r: r["test/cls/Acc"] != COLLAPSED_ACC),
        ):
            kept = {int(f.name[4:]): _results(f) for f in sorted((runs_dir / d).glob("seed*"))}
            kept = {k: r for k, r in kept.items() if keep(r)}
            for metric, column in (
                ("cos_reg", "test/div/signorm_cos_regularized"),
                ("JG", "test/div/jensen_gap"),
                ("Acc", "test/cls/Acc"),
                ("NLL", "test/cls/NLL"),
            ):
                rows.append(
                    _row(
                        f"τ = {tau:g} {metric}, {label}",
                        {
                            "mean": float(np.mean([r[column] for r in kept.values()])),
                            "low": math.nan,
                            "high": math.nan,
                        },
                        metric,
                        sorted(kept),
                    )
                )
    taus, cos = [], []
    for tau, d in TAU_RUNS.items():
        for folder in sorted((runs_dir / d).glob("seed*")):
            taus.append(tau)
            cos.append(_results(folder)["test/div/signorm_cos_regularized"])
    from scipy import stats

    rho = float(stats.spearmanr(taus, cos).statistic)
    rows.append(
        _row(
            "Spearman ρ(τ, regularized σNorm-cos), ties in τ kept",
            {"mean": rho, "low": math.nan, "high": math.nan, "p": spearman_p(taus, cos)},
            "rho",
            [],
        )
    )
    seed0 = [runs_dir / d / "seed0" for d in TAU_RUNS.values()]
    for label, step in (
        (
            "members one model (train σNorm-cos >= 0.999) in all three up to step",
            shared_until(seed0, "train/signorm_cos", equal=False),
        ),
        ("validation accuracy equal in all three up to step", shared_until(seed0, "val/cls/Acc")),
    ):
        rows.append(
            _row(
                f"seed-0 runs at τ = 0.04, 0.08, 0.16: {label}",
                {"mean": math.nan if step is None else step, "low": math.nan, "high": math.nan},
                "step",
                [0],
            )
        )
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("studies/results/tweets_study/controlled"))
    args = parser.parse_args(argv)
    rows = seed_level(args.out / "runs")
    with (args.out / "seed_level.csv").open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
