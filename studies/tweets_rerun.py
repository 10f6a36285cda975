"""The registered tweets study re-run at the training fix (design:
studies/results/tweets_study/rerun).

The 16 registered runs of :mod:`studies.tweets_controlled` and its statistics unchanged, plus
what the design adds before the runs: the seed-level reading (:mod:`studies.tweets_seed_level`),
the collapse rule, each σN-Ens run's output diversity, and seeds 3-5 of the methods part as a
declared extension read with the seed as the unit::

    python -m studies.tweets_rerun --out studies/results/tweets_study/rerun \
        --accelerator gpu --jobs 28
    python -m studies.tweets_rerun --out studies/results/tweets_study/rerun --tables-only

``--steps 480`` trains the methods part at seeds 0-5 with that budget instead (design:
studies/results/tweets_study/rerun_long) and compares σN-Ens with the other three, paired by seed,
Holm over the three (:func:`budget_tables`).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch
from safetensors.torch import load_file

from signorm_lab.reproduction.results_table import write_rows
from signorm_lab.reproduction.tables import markdown_table
from torch_uncertainty_signorm.evaluation.diversity import mutual_information

from ._command import train_runs
from .stats import correlation_ratio, holm, mean_interval, paired_difference, spearman_p
from .tweets_controlled import PREDICTIONS, TAU, StudyRun, record_run, study_runs, write_artefacts
from .tweets_seed_level import _results, seed_level

EXTENSION_SEEDS = (3, 4, 5)
PACKAGES = (
    "torch",
    "lightning",
    "torch-uncertainty",
    "transformers",
    "timm",
    "jsonargparse",
    "torch-uncertainty-signorm",
)
PROVENANCE = "provenance.json"


def extension_runs(seeds: Sequence[int] = EXTENSION_SEEDS) -> list[StudyRun]:
    """The methods part at more seeds: Single, Deep Ensembles, σN-Ens at M = 1 and M = 4."""
    return [
        run
        for s in seeds
        for run in (
            StudyRun("single", s, num_estimators=1),
            StudyRun("signorm", s, num_estimators=1, tau=TAU),
            StudyRun("signorm", s, tau=TAU),
            StudyRun("deep_ensembles", s),
        )
    ]


@dataclass(frozen=True)
class OnDevice:
    """A study run with the trainer's accelerator set on the command line."""

    run: StudyRun
    accelerator: str
    runs_dir: Path
    steps: int | None = None
    clip: float | None = None

    def log_dir(self, _runs_dir: Path | None = None) -> Path:
        return self.run.log_dir(self.runs_dir)

    def command(self, _runs_dir: Path | None = None) -> list[str]:
        budget = (
            []
            if self.steps is None
            else [
                f"--trainer.max_steps={self.steps}",
                f"--lr_scheduler.init_args.total_steps={self.steps}",
            ]
        )
        clip = [] if self.clip is None else [f"--trainer.gradient_clip_val={self.clip:g}"]
        return [
            *self.run.command(self.runs_dir),
            f"--trainer.accelerator={self.accelerator}",
            *budget,
            *clip,
        ]


def provenance(accelerator: str) -> dict:
    """The commit (``git``, else ``SIGNORM_COMMIT`` for a copy without its history), whether
    ``src`` differs from it, the package versions and the device."""
    here = Path(__file__).resolve().parent
    git = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=here, check=False
    )
    commit = git.stdout.strip() if git.returncode == 0 else os.environ.get("SIGNORM_COMMIT", "")
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "src"],
        capture_output=True,
        text=True,
        cwd=here,
        check=False,
    )
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = "not installed (source tree on PYTHONPATH)"
    device = (
        torch.cuda.get_device_name(0)
        if accelerator == "gpu" and torch.cuda.is_available()
        else platform.processor() or platform.machine()
    )
    return {
        "commit": commit,
        "src_modified": bool(dirty.stdout.strip())
        if git.returncode == 0
        else "unknown (no git history; the copy is an archive of the commit)",
        "python": platform.python_version(),
        "versions": versions,
        "accelerator": accelerator,
        "device": device,
    }


def train(runs: Sequence[tuple], accelerator: str, jobs: int, steps: int | None = None) -> None:
    """Train every ``(run, runs folder)`` not kept, ``jobs`` at a time (all in one pool, so
    the extension trains beside the registered runs), each recording its provenance."""
    record = provenance(accelerator)

    def finish(on_device: OnDevice, log_dir: Path, seconds: float) -> None:
        record_run(on_device.run, log_dir, seconds)
        (log_dir / PROVENANCE).write_text(json.dumps(record, indent=1))

    train_runs(
        [OnDevice(r, accelerator, d, steps, *clip) for r, d, *clip in runs],
        Path(),
        jobs,
        record=finish,
        kept=lambda d: (d / "results.csv").is_file() and (d / PROVENANCE).is_file(),
    )


def _last(rows: list[dict], column: str) -> float:
    values = [float(r[column]) for r in rows if r.get(column) not in (None, "")]
    return values[-1] if values else math.nan


def run_rows(runs_dir: Path) -> list[dict]:
    """One row per run: test accuracy and NLL, the collapse rule's two signs, and the output
    diversity of its test predictions (Jensen gap, mutual information) beside σNorm-cos."""
    rows = []
    for folder in sorted(Path(runs_dir).glob("*/seed*")):
        if not (folder / "results.csv").is_file():
            continue
        with (folder / "results.csv").open(newline="") as file:
            result = {k: float(v) for k, v in list(csv.DictReader(file))[-1].items() if v}
        log = folder / "metrics.csv"
        log = log if log.is_file() else folder / "trajectory.csv"
        with log.open(newline="") as file:
            metrics = list(csv.DictReader(file))
        settings = json.loads((folder / "settings.json").read_text())
        probs = load_file(folder / PREDICTIONS)["probs/0"].double()
        classes = int(probs.mean(0).argmax(-1).unique().numel())
        last_one_class = _last(metrics, "val/health/one_class")
        rows.append(
            {
                "run": folder.parent.name,
                "seed": settings["seed"],
                "tau": settings.get("tau"),
                "M": settings["num_estimators"],
                "test Acc %": 100 * result["test/cls/Acc"],
                "test NLL": result["test/cls/NLL"],
                "classes predicted": classes,
                "last val one-class": last_one_class,
                "collapsed": classes == 1 or last_one_class > 0,
                "σNorm-cos reg": result.get("test/div/signorm_cos_regularized", math.nan),
                "Jensen gap": result.get("test/div/jensen_gap", math.nan),
                "mutual information": float(mutual_information(probs).mean()),
                "run seconds": settings.get("run_seconds"),
            }
        )
    return rows


def tau_orders(rows: list[dict]) -> list[dict]:
    """Over the σN-Ens M = 4 runs of the τ grid: Spearman ρ of τ with each diversity measure
    (exact p, ties kept) and η of the measure on τ."""
    grid = [r for r in rows if r["run"].startswith("signorm_M4")]
    taus = [r["tau"] for r in grid]
    out = []
    for column in ("σNorm-cos reg", "Jensen gap", "mutual information"):
        values = [r[column] for r in grid]
        if len(set(taus)) < 2 or any(math.isnan(v) for v in values):
            continue
        from scipy import stats

        out.append(
            {
                "measure": column,
                "runs": len(grid),
                "spearman ρ(τ, measure)": float(stats.spearmanr(taus, values).statistic),
                "exact p": spearman_p(taus, values),
                "η (measure on τ)": correlation_ratio(values, taus),
            }
        )
    return out


def combined_runs(folders: Sequence[Path], into: Path) -> Path:
    """One runs folder of symbolic links to every ``<run>/seed<S>`` of ``folders``."""
    for folder in folders:
        for seed_dir in sorted(Path(folder).glob("*/seed*")):
            link = into / seed_dir.parent.name / seed_dir.name
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.exists():
                link.symlink_to(seed_dir.resolve(), target_is_directory=True)
    return into


def write_tables(out: Path) -> str:
    """The registered artefacts, the seed-level reading, the per-run table and the extension."""
    runs_dir, extension_dir = out / "runs", out / "extension" / "runs"
    write_artefacts(runs_dir, out)
    write_rows(seed_level(runs_dir), out / "seed_level.csv")
    rows = run_rows(runs_dir)
    write_rows(rows, out / "runs.csv")
    orders = tau_orders(rows)
    if orders:
        write_rows(orders, out / "tau_orders.csv")
    sections = ["# Tweets study re-run: per run\n", markdown_table(rows, list(rows[0]))]
    if orders:
        sections += [
            "## τ and the diversity measures (σN-Ens M = 4, τ grid)\n",
            markdown_table(orders, list(orders[0])),
        ]
    if any(extension_dir.glob("*/seed*/results.csv")):
        extension = run_rows(extension_dir)
        write_rows(extension, out / "extension" / "runs.csv")
        with tempfile.TemporaryDirectory() as scratch:
            combined = combined_runs([runs_dir, extension_dir], Path(scratch))
            write_rows(seed_level(combined), out / "extension" / "seed_level.csv")
        sections += [
            "## Extension runs (seeds 3-5)\n",
            markdown_table(extension, list(extension[0])),
        ]
    text = "\n".join(sections)
    (out / "runs.md").write_text(text + "\n")
    return text


#: The budget follow-up's primary comparisons: NLL of σN-Ens minus each of these.
BUDGET_BASELINES = {
    "Single": "single",
    "Deep Ensembles": "deep_ensembles_M4",
    "σN-Ens M = 1": "signorm_M1_tau0.08",
}
SIGNORM = "signorm_M4_tau0.08"
MARGIN, ALPHA = 0.01, 0.05


def budget_verdict(low: float, high: float, margin: float = MARGIN, rejected: bool = True) -> str:
    """The follow-up's registered rule for an interval of NLL(σN-Ens) − NLL(other); a difference
    is claimed only where Holm's step-down test ``rejected``."""
    if (high < 0 or low > 0) and not rejected:
        return "open (Holm stopped before it)"
    if high < 0:
        return "σN-Ens better"
    if low > 0:
        return "σN-Ens worse"
    if -margin <= low and high <= margin:
        return f"equivalent within ±{margin:g} nats"
    return "open"


def budget_tables(out: Path, shorter: Path | None) -> str:
    """The follow-up's primary comparisons (Holm over the three), its secondary readings, and
    σN-Ens's diversity against the ``shorter`` budget's runs of the same seeds."""

    runs_dir = out / "runs"
    write_artefacts(runs_dir, out)
    rows = run_rows(runs_dir)
    write_rows(rows, out / "runs.csv")
    by = {(r["run"], r["seed"]): r for r in rows}
    seeds = sorted(s for (run, s) in by if run == SIGNORM)
    collapsed = {(r["run"], r["seed"]) for r in rows if r["collapsed"]}
    primary = {}
    for label, other in BUDGET_BASELINES.items():
        pairs = [s for s in seeds if (other, s) in by]
        primary[label] = (
            pairs,
            paired_difference(
                [by[SIGNORM, s]["test NLL"] for s in pairs],
                [by[other, s]["test NLL"] for s in pairs],
            ),
        )
    family = holm({label: plain["p"] for label, (_, plain) in primary.items()}, len(primary), ALPHA)
    table = []
    for label, test in family.items():  # in the order of the p-values
        pairs, plain = primary[label]
        level = test["level"]
        other = BUDGET_BASELINES[label]
        held = paired_difference(
            [by[SIGNORM, s]["test NLL"] for s in pairs],
            [by[other, s]["test NLL"] for s in pairs],
            level,
        )
        bad = [f"{run} seed {s}" for run, s in sorted(collapsed) if run in (SIGNORM, other)]
        table.append(
            {
                "comparison": f"NLL σN-Ens − {label}",
                "seeds": len(pairs),
                "mean": plain["mean"],
                "p": plain["p"],
                "Holm level": level,
                "low": held["low"],
                "high": held["high"],
                "verdict": ("open (collapsed: " + ", ".join(bad) + ")")
                if bad
                else budget_verdict(held["low"], held["high"], rejected=test["rejected"]),
            }
        )
    write_rows(table, out / "primary.csv")
    secondary = []
    for label, other in BUDGET_BASELINES.items():
        for metric, column, scale in (
            ("shift ECE (points)", "shift/mean/ECE", 100),
            ("Acc (points)", "test/cls/Acc", 100),
        ):
            pairs = [s for s in seeds if (other, s) in by]
            values = {}
            for run in (SIGNORM, other):
                values[run] = [scale * _results(runs_dir / run / f"seed{s}")[column] for s in pairs]
            secondary.append(
                {"comparison": f"{metric} σN-Ens − {label}"}
                | paired_difference(values[SIGNORM], values[other])
            )
    shorter_rows = (
        []
        if shorter is None
        else run_rows(shorter / "runs") + run_rows(shorter / "extension" / "runs")
    )
    short = {r["seed"]: r for r in shorter_rows if r["run"] == SIGNORM}
    pairs = [s for s in seeds if s in short]
    diversity = ("σNorm-cos reg", "Jensen gap", "mutual information", "test NLL")
    for column in diversity if pairs else ():
        secondary.append(
            {"comparison": f"σN-Ens {column}: 480 − 120 steps"}
            | paired_difference(
                [by[SIGNORM, s][column] for s in pairs], [short[s][column] for s in pairs]
            )
        )
        secondary.append(
            {"comparison": f"σN-Ens {column} at 480 steps"}
            | mean_interval([by[SIGNORM, s][column] for s in pairs])
        )
    write_rows(secondary, out / "secondary.csv")
    text = "\n".join(
        [
            "# Four times the budget: primary comparisons\n",
            markdown_table(table, list(table[0])),
            "## Secondary\n",
            markdown_table(secondary, list(dict.fromkeys(k for r in secondary for k in r))),
            "## Runs\n",
            markdown_table(rows, list(rows[0])),
        ]
    )
    (out / "budget.md").write_text(text + "\n")
    return text


CLIP = 1.0
CLIP_SEEDS, MORE_SEEDS = (0, 1, 2, 3, 4, 5), (6, 7, 8, 9, 10, 11)


def clip_runs(out: Path) -> list[tuple]:
    """The clipping study's 42 runs: ``(run, runs folder, clip)`` (its design:
    studies/results/tweets_study/rerun_clip/DESIGN.md)."""
    m1 = [StudyRun("signorm", s, num_estimators=1, tau=TAU) for s in MORE_SEEDS]
    m1_all = [StudyRun("signorm", s, num_estimators=1, tau=TAU) for s in CLIP_SEEDS + MORE_SEEDS]
    return (
        [(r, out / "runs", CLIP) for r in extension_runs(CLIP_SEEDS)]
        + [(r, out / "runs", CLIP) for r in m1]
        + [(r, out / "unclipped" / "runs", None) for r in m1_all]
    )


def clip_tables(out: Path, unclipped: Path) -> str:
    """Relapse counts per method and arm (exact intervals), clipped − unclipped per method
    (paired by seed), and the budget follow-up's primary comparisons under clipping."""
    from scipy import stats

    clipped = run_rows(out / "runs")
    retrained = run_rows(out / "unclipped" / "runs")
    plain = [
        r for r in run_rows(unclipped / "runs") if r["run"] not in {t["run"] for t in retrained}
    ] + retrained
    earlier = {(r["run"], r["seed"]): r for r in run_rows(unclipped / "runs")}
    agreement = [
        {
            "run": r["run"],
            "seed": r["seed"],
            "test NLL here": r["test NLL"],
            "test NLL earlier": earlier[r["run"], r["seed"]]["test NLL"],
            "collapsed here": r["collapsed"],
            "collapsed earlier": earlier[r["run"], r["seed"]]["collapsed"],
        }
        for r in retrained
        if (r["run"], r["seed"]) in earlier
    ]
    if agreement:
        write_rows(agreement, out / "code_agreement.csv")
    counts = []
    for arm, rows in (("clipped", clipped), ("unclipped", plain)):
        for run in sorted({r["run"] for r in rows}):
            group = [r for r in rows if r["run"] == run]
            k = sum(bool(r["collapsed"]) for r in group)
            ci = stats.binomtest(k, len(group)).proportion_ci(method="exact")
            counts.append(
                {
                    "arm": arm,
                    "run": run,
                    "runs": len(group),
                    "relapsed": k,
                    "seeds relapsed": " ".join(str(r["seed"]) for r in group if r["collapsed"]),
                    "rate low": ci.low,
                    "rate high": ci.high,
                }
            )
    write_rows(counts, out / "relapses.csv")
    by_clip = {(r["run"], r["seed"]): r for r in clipped}
    by_plain = {(r["run"], r["seed"]): r for r in plain}
    cost = []
    for run in sorted({r["run"] for r in clipped}):
        seeds = [s for s in CLIP_SEEDS if (run, s) in by_clip and (run, s) in by_plain]
        columns = ["test NLL", "test Acc %"] + (
            ["σNorm-cos reg", "Jensen gap", "mutual information"] if run == SIGNORM else []
        )
        for column in columns:
            cost.append(
                {"run": run, "measure": f"{column}: clipped − unclipped"}
                | paired_difference(
                    [by_clip[run, s][column] for s in seeds],
                    [by_plain[run, s][column] for s in seeds],
                )
            )
        plain_dir = (
            out / "unclipped" / "runs"
            if (out / "unclipped" / "runs" / run).is_dir()
            else unclipped / "runs"
        )
        shift = [
            [100 * _results(folder / run / f"seed{s}")["shift/mean/ECE"] for s in seeds]
            for folder in (out / "runs", plain_dir)
        ]
        cost.append(
            {"run": run, "measure": "shift ECE (points): clipped − unclipped"}
            | paired_difference(*shift)
        )
    write_rows(cost, out / "clip_cost.csv")
    text = "\n".join(
        [
            "# Gradient clipping at 480 steps\n",
            "## Relapses\n",
            markdown_table(counts, list(counts[0])),
            "## Clipped − unclipped\n",
            markdown_table(cost, list(cost[0])),
        ]
        + (
            [
                "## The retrained unclipped runs against the earlier commit's\n",
                markdown_table(agreement, list(agreement[0])),
            ]
            if agreement
            else []
        )
        + [budget_tables(out, None)]
    )
    (out / "clip.md").write_text(text + "\n")
    return text


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m studies.tweets_rerun", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=Path, default=Path("studies/results/tweets_study/rerun"))
    parser.add_argument("--accelerator", default="cpu", choices=["cpu", "gpu"])
    parser.add_argument("--jobs", type=int, default=2, help="runs trained at a time")
    parser.add_argument("--no-extension", action="store_true", help="only the registered runs")
    parser.add_argument("--tables-only", action="store_true", help="only redraw the tables")
    parser.add_argument("--runs-only", action="store_true", help="only train the runs")
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="train the methods part at seeds 0-5 with this many steps instead",
    )
    parser.add_argument(
        "--clip-study",
        action="store_true",
        help="train and tabulate the gradient-clipping study at 480 steps",
    )
    parser.add_argument(
        "--shorter",
        type=Path,
        default=Path("studies/results/tweets_study/rerun"),
        help="the re-run at the registered budget, compared with --steps runs",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    if args.clip_study:
        if not args.tables_only:
            train(clip_runs(args.out), args.accelerator, args.jobs, 480)
        if not args.runs_only:
            print(clip_tables(args.out, args.out.parent / "rerun_long"))
        return
    if args.steps is not None:
        if args.steps < 1:
            parser.error(f"--steps must be >= 1, got {args.steps}")
        if not args.tables_only:
            runs = [(r, args.out / "runs") for r in extension_runs((0, 1, 2, 3, 4, 5))]
            train(runs, args.accelerator, args.jobs, args.steps)
        if not args.runs_only:
            print(budget_tables(args.out, args.shorter))
        return
    if not args.tables_only:
        runs = [(r, args.out / "runs") for r in study_runs()]
        if not args.no_extension:
            runs += [(r, args.out / "extension" / "runs") for r in extension_runs()]
        train(runs, args.accelerator, args.jobs)
    if not args.runs_only:
        print(write_tables(args.out))


if __name__ == "__main__":
    main()
