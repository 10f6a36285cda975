"""Does σN-Ens train as reliably as the model it wraps? The tweets study's schedule, seeds 0-5.

Every run is the ``torch-uncertainty fit`` command on ``experiments/tweets_study_*.yaml`` (120
SGD steps of 8 tweets, validation every 20 steps, the last weights tested on the 1,500 test
tweets), σN-Ens at M = 1 and M = 4 (τ = 0.08, λ = 1e-3, ``member_lr_multiplier = M``) and
Single, without the OOD and corrupted sets. Each run folder also gets ``provenance.json`` (the
commit, the package versions). The table counts, per run, the validation checks after warm-up
(step 20 on) where one class takes >= 95 % of the predictions (``val/health/one_class``, or,
for runs made before that metric existed, an accuracy equal to a class prior of the
validation set: 0.383 or 0.480)::

    OMP_NUM_THREADS=1 python -m studies.tweets_seed_table --out studies/results/reliability/tweets
    python -m studies.tweets_seed_table --out studies/results/reliability/tweets --table-only \
        --earlier studies/results/tweets_study/controlled/runs
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
from importlib.metadata import version
from pathlib import Path

from signorm_lab.reproduction.tables import markdown_table

from ._command import train_runs
from .tweets_controlled import StudyRun, record_run

SEEDS = tuple(range(6))
TAU = 0.08
#: Validation accuracies that equal a class prior of the 256 validation tweets (all-negative,
#: all-neutral, all-positive): a one-class check in runs that predate ``val/health/one_class``.
CLASS_PRIORS = ("0.480", "0.383", "0.137")
PACKAGES = ("torch", "lightning", "torch-uncertainty", "transformers", "torch-uncertainty-signorm")


def seed_runs(seeds=SEEDS, single_seeds=SEEDS, members=(1, 4)) -> list[StudyRun]:
    runs = [
        StudyRun("signorm", s, num_estimators=m, tau=TAU, evaluate_shift=False)
        for m in members
        for s in seeds
    ]
    return runs + [
        StudyRun("single", s, num_estimators=1, evaluate_shift=False) for s in single_seeds
    ]


def provenance() -> dict:
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).parent,
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "src"],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).parent,
    ).stdout.strip()
    return {
        "commit": commit,
        "src_modified": bool(dirty),
        "versions": {name: version(name) for name in PACKAGES},
    }


def _record(run: StudyRun, log_dir: Path, seconds: float) -> None:
    record_run(run, log_dir, seconds)
    (log_dir / "provenance.json").write_text(json.dumps(provenance(), indent=1))


def _label(runs_dir: Path) -> str:
    """``earlier (<commit>)`` from a run's ``provenance.json``, else ``earlier (study)``."""
    found = sorted(runs_dir.glob("*/seed*/provenance.json"))
    commit = json.loads(found[0].read_text())["commit"][:7] if found else "study"
    return f"earlier ({commit})"


def one_class_checks(log_dir: Path) -> tuple[int, int]:
    """(one-class validation checks after warm-up, checks) of a run's metrics."""
    rows = list(csv.DictReader((log_dir / "trajectory.csv").open()))
    metrics = log_dir / "metrics.csv"
    if metrics.is_file():
        health = [r for r in csv.DictReader(metrics.open()) if r.get("val/health/one_class")]
        if health:
            late = [r for r in health if int(r["step"]) >= 20]
            return sum(float(r["val/health/one_class"]) > 0 for r in late), len(late)
    checks = [r for r in rows if r.get("val/cls/Acc") and int(r["step"]) >= 20]
    return sum(f"{float(r['val/cls/Acc']):.3f}" in CLASS_PRIORS for r in checks), len(checks)


def table(runs_dirs: dict[str, Path]) -> list[dict]:
    """One row per code version, method, M and seed found under ``runs_dirs``."""
    rows = []
    for code, runs_dir in runs_dirs.items():
        for log_dir in sorted(runs_dir.glob("*/seed*")):
            if (
                not (log_dir / "results.csv").is_file()
                or "tau0.04" in log_dir.parent.name
                or "tau0.16" in log_dir.parent.name
                or "deep" in log_dir.parent.name
            ):
                continue
            result = list(csv.DictReader((log_dir / "results.csv").open()))[-1]
            relapses, checks = one_class_checks(log_dir)
            rows.append(
                {
                    "code": code,
                    "run": log_dir.parent.name,
                    "seed": int(log_dir.name.removeprefix("seed")),
                    "test Acc %": round(100 * float(result["test/cls/Acc"]), 1),
                    "test NLL": round(float(result["test/cls/NLL"]), 4),
                    "one-class val checks": f"{relapses}/{checks}",
                }
            )
    return sorted(rows, key=lambda r: (r["run"], r["seed"], r["code"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    parser.add_argument("--single-seeds", nargs="*", type=int, default=[3, 4, 5])
    parser.add_argument("--members", nargs="+", type=int, default=[1, 4])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--table-only", action="store_true")
    parser.add_argument(
        "--earlier",
        type=Path,
        nargs="*",
        default=[],
        help="runs folders made by the earlier code, tabulated beside",
    )
    args = parser.parse_args()
    runs_dir = args.out / "runs"
    if not args.table_only:
        train_runs(
            seed_runs(args.seeds, args.single_seeds, args.members),
            runs_dir,
            args.jobs,
            record=_record,
            kept=lambda d: (d / "provenance.json").is_file(),
        )
    dirs = {"fixed": runs_dir} | {_label(d): d for d in args.earlier}
    rows = table(dirs)
    with (args.out / "seed_table.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    text = markdown_table(rows, list(rows[0]))
    (args.out / "seed_table.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
