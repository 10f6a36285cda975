"""The attribution study on digits: where σN-Ens's gain comes from
(``studies/results/attribution_study``).

The design, arms, measures and decision rules are registered in
``studies/results/attribution_study/DESIGN.md``; this module trains its runs and reads them by
those rules.
Every run is the ``torch-uncertainty fit`` command on
``experiments/digits_study_{single,signorm}.yaml`` of a frozen checkout of the registered commit
(``--code``: the command runs in that folder, with its ``src`` first on ``PYTHONPATH``), the arm's
settings as command-line overrides, into ``runs/<arm>/seed<S>/``: ``results.csv``, the saved
``config.yaml``, ``settings.json``,
``trajectory.csv`` (the study's columns of Lightning's ``metrics.csv``, health included),
``provenance.json`` (the checkout's commit, whether its ``src`` was modified, the imported
package's file, the package versions) and ``test_nll.csv`` (each test image's ensemble NLL, for
the example-level bootstrap)::

    git worktree add /work/attribution c4ba571
    OMP_NUM_THREADS=1 python -m studies.attribution_study --code /work/attribution --jobs 2
    python -m studies.attribution_study --analysis-only

Runs already present are kept; the analysis reads the kept files alone.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path

import numpy as np

from ._command import train_runs

OUT = Path(__file__).resolve().parent / "results" / "attribution_study"
SEEDS, PLACEMENT_SEEDS = (0, 1, 2, 3, 4), (0, 1, 2)
PLACEMENT_TAUS = (0.01, 0.1, 1.0)
PLACEMENTS = {"second": "resnet18", "first": r"(.*\.)?layer\d+\.\d+\.bn1"}
MODEL, ROUTINE = "--routine.init_args.model.init_args", "--routine.init_args"
#: Arm -> (recipe, overrides of it), as registered.
ARMS = {
    "A_single": ("digits_study_single.yaml", ()),
    "B_signorm_M1": (
        "digits_study_signorm.yaml",
        (f"{MODEL}.num_estimators=1", f"{ROUTINE}.member_lr_multiplier=1"),
    ),
    "C_M4_lambda0": (
        "digits_study_signorm.yaml",
        (f"{MODEL}.diversity_strength=0", f"{ROUTINE}.warn_identical_members=false"),
    ),
    "D_M4_tau0.1": ("digits_study_signorm.yaml", ()),
    "E_M4_lambda0_nospread": (
        "digits_study_signorm.yaml",
        (
            f"{MODEL}.diversity_strength=0",
            f"{MODEL}.scale_init_std=0",
            f"{ROUTINE}.warn_identical_members=false",
        ),
    ),
    "F_M4_tau0.1_symmetric": (
        "digits_study_signorm.yaml",
        (f"{MODEL}.scale_init_std=0", f"{MODEL}.member_spread=0.05"),
    ),
}
PACKAGES = ("torch", "lightning", "torch-uncertainty", "torch-uncertainty-signorm")
KEPT_COLUMNS = (
    "step",
    "epoch",
    "train_loss",
    "train/signorm_cos",
    "train/signorm_cos_regularized",
    "train/diversity_loss",
    "val/cls/NLL",
    "val/cls/Acc",
    "val/cal/ECE",
    "val/div/signorm_cos",
    "val/div/signorm_cos_regularized",
    "val/div/jensen_gap",
    "val/health/one_class",
    "val/health/dead_members",
)
PREDICTIONS = "test_predictions.safetensors"
RERUN = "_rerun"


@dataclass(frozen=True)
class AttributionRun:
    """One run: an arm (A-F) or a placement cell, and its seed."""

    arm: str
    seed: int
    placement: str | None = None
    tau: float | None = None
    rerun: bool = False  # a rerun of a run that failed a check, same commit, seed and command

    @property
    def name(self) -> str:
        name = self.arm if self.placement is None else f"placement_{self.placement}_tau{self.tau:g}"
        return f"{name}{RERUN}" if self.rerun else name

    def log_dir(self, runs_dir: Path) -> Path:
        return Path(runs_dir) / self.name / f"seed{self.seed}"

    def command(self, runs_dir: Path) -> list[str]:
        log_dir = self.log_dir(runs_dir).resolve()
        if self.placement is None:
            recipe, overrides = ARMS[self.arm]
        else:
            recipe = "digits_study_signorm.yaml"
            overrides = (
                f"{MODEL}.tau={self.tau:g}",
                f"{MODEL}.diversity_strength=0.01",
                f"{MODEL}.regularized_layers={PLACEMENTS[self.placement]}",
            )
        return [
            "torch-uncertainty",
            "fit",
            "--config",
            f"experiments/{recipe}",
            f"--seed_everything={self.seed}",
            f"--trainer.logger.init_args.save_dir={log_dir.parent.parent}",
            f"--trainer.logger.init_args.name={log_dir.parent.name}",
            f"--trainer.logger.init_args.version={log_dir.name}",
            *overrides,
            "--trainer.callbacks+=signorm_lab.callbacks.TestPredictionWriter",
            "--trainer.callbacks.dataloaders=[0]",
        ]


def study_runs(parts=("arms", "placement")) -> list[AttributionRun]:
    """The registered runs: arms A-F × seeds 0-4, then the placement sweep."""
    runs: list[AttributionRun] = []
    if "arms" in parts:
        runs += [AttributionRun(arm, s) for arm in ARMS for s in SEEDS]
    if "placement" in parts:
        # H4 reads τ = 0.01 and τ = 1 of both placements: those first, τ = 0.1 last (the
        # second-norm τ = 0.1 cell is arm D's command, last of all)
        cells = [(p, t) for t in (0.01, 1.0, 0.1) for p in ("first", "second")]
        runs += [
            AttributionRun("placement", s, placement=p, tau=t)
            for p, t in cells
            for s in PLACEMENT_SEEDS
        ]
    return runs


def provenance(code: Path) -> dict:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(code), *args], capture_output=True, check=False, text=True
        ).stdout.strip()

    imported = subprocess.run(
        ["python", "-c", "import torch_uncertainty_signorm as t; print(t.__file__)"],
        capture_output=True,
        text=True,
        cwd=code,
        check=False,
    ).stdout.strip()
    return {
        "commit": git("rev-parse", "HEAD"),
        "src_modified": bool(git("status", "--porcelain", "src", "experiments")),
        "imported_from": imported,
        "versions": {name: version(name) for name in PACKAGES},
    }


def write_trajectory(log_dir: Path) -> None:
    with (log_dir / "metrics.csv").open(newline="") as file:
        rows = list(csv.DictReader(file))
    columns = [c for c in KEPT_COLUMNS if rows and c in rows[0]]
    kept = [
        {c: row[c] for c in columns}
        for row in rows
        if any(row[c] not in ("", None) for c in columns if c not in ("step", "epoch"))
    ]
    with (log_dir / "trajectory.csv").open("w", newline="") as file:
        writer = csv.DictWriter(file, columns)
        writer.writeheader()
        writer.writerows(kept)


def write_example_nll(log_dir: Path) -> None:
    """``test_nll.csv``: each test image's target, ensemble prediction and ensemble NLL (mean
    of the members' probabilities), from the saved predictions, which are then removed."""
    from safetensors.torch import load_file

    saved = load_file(log_dir / PREDICTIONS)
    probs, targets = saved["probs/0"].double().mean(0), saved["targets/0"].long()
    nll = -probs.gather(1, targets[:, None]).squeeze(1).clamp_min(1e-300).log()
    preds = probs.argmax(1)
    with (log_dir / "test_nll.csv").open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["index", "target", "pred", "nll"])
        writer.writerows(
            (i, int(t), int(p), f"{float(v):.6g}")
            for i, (t, p, v) in enumerate(zip(targets, preds, nll, strict=True))
        )
    (log_dir / PREDICTIONS).unlink()


def make_record(code: Path):
    info = provenance(code)

    def record(run: AttributionRun, log_dir: Path, seconds: float) -> None:
        write_trajectory(log_dir)
        write_example_nll(log_dir)
        (log_dir / "metrics.csv").unlink()
        (log_dir / "settings.json").write_text(
            json.dumps(asdict(run) | {"name": run.name, "run_seconds": round(seconds, 1)}, indent=1)
        )
        (log_dir / "provenance.json").write_text(json.dumps(info, indent=1))

    return record


def run_study(code: Path, runs_dir: Path, jobs: int, parts, reruns=()) -> None:
    """Train (or keep) the runs of ``parts``, then the ``reruns`` (``arm:seed``: the same
    command into ``<arm>_rerun/seed<S>``)."""
    code, runs_dir = Path(code).resolve(), Path(runs_dir).resolve()
    os.chdir(code)
    os.environ["PYTHONPATH"] = str(code / "src")
    runs = study_runs(parts) + [
        AttributionRun(r.split(":")[0], int(r.split(":")[1]), rerun=True) for r in reruns
    ]
    train_runs(
        runs,
        runs_dir,
        jobs,
        record=make_record(code),
        kept=lambda d: (d / "provenance.json").is_file(),
    )


# ------------------------------------------------------------------------------ analysis
COMMIT = "c4ba5715bd1232dd59cfcf0afabfffe3618ba506"
DELTA, ALPHA, FAMILY = 0.02, 0.05, 4
CONVERGENCE_LIMIT, DIVERGED, ONE_CLASS_SHARE = 0.02, 0.99, 0.95
COLUMNS = {
    "NLL": "test/cls/NLL",
    "Acc": "test/cls/Acc",
    "ECE": "test/cal/ECE",
    "JG": "test/div/jensen_gap",
    "MI": "test/ens_MI",
    "cos_reg": "test/div/signorm_cos_regularized",
}
#: Hypothesis -> (the contrast that orders it for Holm: (run a, run b) of NLL, a - b).
CONTRASTS = {
    "H1": ("D_M4_tau0.1", "B_signorm_M1"),
    "H2": ("D_M4_tau0.1", "C_M4_lambda0"),
    "H3": ("F_M4_tau0.1_symmetric", "E_M4_lambda0_nospread"),
    "H4": ("placement_first_tau0.01", "placement_first_tau1"),
}


def load_runs(runs_dir: Path) -> dict[str, dict[int, dict]]:
    """``{run name: {seed: run}}`` of every finished run (one with ``provenance.json``)."""
    runs: dict[str, dict[int, dict]] = {}
    for folder in sorted(Path(runs_dir).glob("*/seed*")):
        if not (folder / "provenance.json").is_file():
            continue
        with (folder / "results.csv").open(newline="") as file:
            metrics = {
                k: float(v) if v not in ("", None) else math.nan
                for k, v in list(csv.DictReader(file))[-1].items()
            }
        with (folder / "test_nll.csv").open(newline="") as file:
            examples = list(csv.DictReader(file))
        with (folder / "trajectory.csv").open(newline="") as file:
            trajectory = list(csv.DictReader(file))
        seed = int(folder.name.removeprefix("seed"))
        runs.setdefault(folder.parent.name, {})[seed] = {
            "folder": folder,
            "metrics": metrics,
            "trajectory": trajectory,
            "nll": np.array([float(r["nll"]) for r in examples]),
            "targets": np.array([int(r["target"]) for r in examples]),
            "preds": (
                np.array([int(r["pred"]) for r in examples]) if "pred" in examples[0] else None
            ),
            "provenance": json.loads((folder / "provenance.json").read_text()),
        }
    return runs


def check_run(name: str, run: dict) -> dict:
    """The registered checks of one run, read before any metric."""
    from .stats import least_squares_change

    points = [
        (float(r["step"]), float(r["val/cls/NLL"]))
        for r in run["trajectory"]
        if r.get("val/cls/NLL") not in (None, "")
    ]
    change = least_squares_change(*zip(*points, strict=True))
    m = run["metrics"]
    if "test/health/one_class" in m:
        one_class, dead = int(m["test/health/one_class"]), int(m["test/health/dead_members"])
        source = "test/health"
    elif run["preds"] is not None:
        share = np.bincount(run["preds"]).max() / len(run["preds"])
        one_class, dead, source = int(share >= ONE_CLASS_SHARE), 0, "predictions"
    else:  # >= 95 % of one class caps the accuracy at 5 % + that class's prior
        prior = np.bincount(run["targets"]).max() / len(run["targets"])
        one_class = int(m["test/cls/Acc"] <= 1 - ONE_CLASS_SHARE + prior)
        dead, source = 0, "accuracy bound"
    cos = m.get("test/div/signorm_cos_regularized", math.nan)
    needs_divergence = name in ("D_M4_tau0.1", "F_M4_tau0.1_symmetric")
    row = {
        "run": f"{name}/{run['folder'].name}",
        "commit": run["provenance"]["commit"][:7],
        "src clean": not run["provenance"]["src_modified"],
        "val NLL change (last 20 %)": round(change, 4),
        "converged": bool(abs(change) < CONVERGENCE_LIMIT),
        "one class": one_class,
        "dead members": dead,
        "health from": source,
        "cos_reg": round(cos, 4) if math.isfinite(cos) else "",
        "diverged": (bool(cos < DIVERGED) if needs_divergence else ""),
    }
    row["passed"] = bool(
        row["commit"] == COMMIT[:7]
        and row["src clean"]
        and row["converged"]
        and not one_class
        and not dead
        and row["diverged"] is not False
    )
    return row


def _paired(runs, a: str, b: str, metric: str, confidence: float) -> dict | None:
    from .stats import paired_difference

    seeds = sorted(set(runs.get(a, {})) & set(runs.get(b, {})))
    if len(seeds) < 2:
        return None
    x = [runs[a][s]["metrics"][COLUMNS[metric]] for s in seeds]
    y = [runs[b][s]["metrics"][COLUMNS[metric]] for s in seeds]
    return paired_difference(x, y, confidence) | {"seeds": seeds}


def _bootstrap(runs, a: str, b: str, seeds, n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Example-level percentile bootstrap of the mean NLL difference (:func:`scipy.stats.bootstrap`,
    test images resampled, the same draw in every seed); reported, deciding nothing."""
    from scipy import stats

    for s in seeds:
        if not np.array_equal(runs[a][s]["targets"], runs[b][s]["targets"]):
            raise ValueError(f"{a} and {b} seed {s} were tested on different images.")

    def mean(*per_seed, axis=-1):
        return np.mean([d.mean(axis=axis) for d in per_seed], axis=0)

    boot = stats.bootstrap(
        [runs[a][s]["nll"] - runs[b][s]["nll"] for s in seeds],
        mean,
        paired=True,  # one draw of images for every seed
        n_resamples=n,
        method="percentile",
        random_state=np.random.default_rng(seed),
    )
    return float(boot.confidence_interval.low), float(boot.confidence_interval.high)


def _inside(d: dict) -> bool:
    return d["low"] >= -DELTA and d["high"] <= DELTA


def _below(d: dict) -> bool:
    return d["high"] < -DELTA


def analyse(runs_dir: Path) -> dict:
    runs = load_runs(runs_dir)
    checks = [check_run(name, run) for name in runs for run in runs[name].values()]
    passed = {r["run"]: r["passed"] for r in checks}
    for name in [n for n in runs if n.endswith(RERUN)]:
        arm = name.removesuffix(RERUN)
        for seed, run in runs.pop(name).items():  # the rerun counts instead if it passes
            if passed[f"{name}/seed{seed}"] and not passed.get(f"{arm}/seed{seed}", True):
                runs[arm][seed] = run
                passed[f"{arm}/seed{seed}"] = True
    failed = {
        key.split("/")[0]
        for key, ok in passed.items()
        if not ok and not key.split("/")[0].endswith(RERUN)
    }
    arms = []
    for name in [*ARMS, *sorted(n for n in runs if n.startswith("placement"))]:
        if name not in runs:
            continue
        row = {"arm": name, "seeds": len(runs[name])}
        for metric, column in COLUMNS.items():
            values = np.array([r["metrics"].get(column, math.nan) for r in runs[name].values()])
            row[metric] = float(values.mean()) if np.isfinite(values).all() else math.nan
            row[f"{metric} sd"] = float(values.std(ddof=1)) if len(values) > 1 else math.nan
        arms.append(row)
    p_values = {}
    for h, (a, b) in CONTRASTS.items():
        d = _paired(runs, a, b, "NLL", 0.95)
        p_values[h] = d["p"] if d else math.nan
    from .stats import holm

    family = holm(p_values, FAMILY, ALPHA)
    levels = {h: test["level"] for h, test in family.items()}
    rejected = {h: test["rejected"] for h, test in family.items()}
    contrasts = [
        ("H1", "D_M4_tau0.1", "B_signorm_M1", "NLL"),
        ("H1 (recipe, reported)", "B_signorm_M1", "A_single", "NLL"),
        ("H2", "D_M4_tau0.1", "C_M4_lambda0", "NLL"),
        ("H3", "F_M4_tau0.1_symmetric", "E_M4_lambda0_nospread", "NLL"),
    ]
    # reported beside, deciding nothing: what each contrast does to the output diversity
    contrasts += [
        (h, a, b, metric)
        for h, a, b, _ in list(contrasts)
        for metric in ("JG", "MI")
        if not h.startswith("H1 (")
    ]
    for placement in PLACEMENTS:
        for metric in ("JG", "NLL", "MI"):
            contrasts.append(
                ("H4", f"placement_{placement}_tau0.01", f"placement_{placement}_tau1", metric)
            )
    differences = []
    for h, a, b, metric in contrasts:
        level = levels[h.split(" ")[0]]
        d = _paired(runs, a, b, metric, level)
        if d is None:
            continue
        row = {
            "hypothesis": h,
            "difference": f"{a} − {b}",
            "metric": metric,
            "seeds": len(d["seeds"]),
            "mean": d["mean"],
            "level": level,
            "low": d["low"],
            "high": d["high"],
            "p": d["p"],
            "bootstrap low": math.nan,
            "bootstrap high": math.nan,
        }
        if metric == "NLL":
            row["bootstrap low"], row["bootstrap high"] = _bootstrap(runs, a, b, d["seeds"])
        row["checks"] = (
            "failed: " + ", ".join(sorted({a, b} & failed)) if {a, b} & failed else "passed"
        )
        differences.append(row)
    return {
        "runs": runs,
        "checks": checks,
        "arms": arms,
        "differences": differences,
        "p_values": p_values,
        "levels": levels,
        "rejected": rejected,
        "failed": failed,
        "verdicts": verdicts(runs, differences, failed, rejected),
    }


def _find(differences, h, a, metric):
    for row in differences:
        if (
            row["hypothesis"] == h
            and row["difference"].startswith(a + " ")
            and row["metric"] == metric
        ):
            return row
    return None


def verdicts(runs, differences, failed, rejected: dict[str, bool] | None = None) -> dict[str, str]:
    """Each hypothesis by its registered rule (open when an arm it reads failed a check, and a
    difference claimed only where Holm's step-down test rejected: ``rejected``, all by default)."""
    out = {}

    def blocked(*names):
        return sorted(set(names) & failed)

    def stepped(h: str, verdict: str, claim: str) -> str:
        if verdict == claim and not (rejected or {}).get(h, True):
            return f"open (Holm stopped before it; by the interval: {verdict})"
        return verdict

    d = _find(differences, "H1", "D_M4_tau0.1", "NLL")
    if d:
        v = "ensemble's" if _below(d) else "not the ensemble's" if _inside(d) else "open"
        v = stepped("H1", v, "ensemble's")
        out["H1"] = (
            v
            if not blocked("D_M4_tau0.1", "B_signorm_M1")
            else f"open (checks failed: {blocked('D_M4_tau0.1', 'B_signorm_M1')}; "
            f"by the interval: {v})"
        )
    d = _find(differences, "H1 (recipe, reported)", "B_signorm_M1", "NLL")
    if d:
        out["B − A (recipe)"] = (
            "lowers NLL" if _below(d) else "no effect beyond δ" if _inside(d) else "open"
        )
    d = _find(differences, "H2", "D_M4_tau0.1", "NLL")
    if d:
        v = "confirmed" if _below(d) else "refuted" if _inside(d) else "open"
        v = stepped("H2", v, "confirmed")
        out["H2"] = (
            v
            if not blocked("D_M4_tau0.1", "C_M4_lambda0")
            else f"open (checks failed; by the interval: {v})"
        )
    d = _find(differences, "H3", "F_M4_tau0.1_symmetric", "NLL")
    if d:
        f_, e_ = runs["F_M4_tau0.1_symmetric"], runs["E_M4_lambda0_nospread"]
        mechanism = all(
            f_[s]["metrics"][COLUMNS["cos_reg"]] < e_[s]["metrics"][COLUMNS["cos_reg"]]
            for s in sorted(set(f_) & set(e_))
        )
        v = (
            "confirmed"
            if _below(d) and mechanism
            else "refuted"
            if _inside(d) and mechanism
            else "open"
        )
        v = stepped("H3", v, "confirmed")
        out["H3"] = (
            v
            if not blocked("F_M4_tau0.1_symmetric", "E_M4_lambda0_nospread")
            else f"open (checks failed; by the interval: {v})"
        )
        out["H3 mechanism (F cos_reg < E cos_reg in every seed)"] = str(mechanism)
    first_jg = _find(differences, "H4", "placement_first_tau0.01", "JG")
    first_nll = _find(differences, "H4", "placement_first_tau0.01", "NLL")
    second_nll = _find(differences, "H4", "placement_second_tau0.01", "NLL")
    if first_jg and first_nll and second_nll:
        moved = first_nll["high"] < -DELTA or first_nll["low"] > DELTA
        confirmed = first_jg["low"] > 0 and moved and _inside(second_nll)
        refuted = _inside(first_nll) and _inside(second_nll)
        v = "confirmed" if confirmed else "refuted" if refuted else "open"
        v = stepped("H4", v, "confirmed")
        cells = [n for n in runs if n.startswith("placement")]
        out["H4"] = v if not blocked(*cells) else f"open (checks failed; by the intervals: {v})"
    return out


def _fmt(x: float, digits: int = 4) -> str:
    return "" if not math.isfinite(x) else f"{x:+.{digits}f}"


def write_artefacts(runs_dir: Path, out: Path) -> str:
    """Write ``checks.csv``, ``arms.csv``, ``differences.csv`` and ``verdicts.csv``; return a
    markdown summary of them."""
    from signorm_lab.reproduction.tables import markdown_table

    result = analyse(runs_dir)
    for filename, rows in (
        ("checks.csv", result["checks"]),
        ("arms.csv", result["arms"]),
        ("differences.csv", result["differences"]),
    ):
        if not rows:
            continue
        with (out / filename).open("w", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    with (out / "verdicts.csv").open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["hypothesis", "verdict", "holm order p", "interval level", "holm rejects"])
        for h, v in result["verdicts"].items():
            key = h.split(" ")[0]
            writer.writerow(
                [
                    h,
                    v,
                    result["p_values"].get(key, ""),
                    result["levels"].get(key, ""),
                    result["rejected"].get(key, ""),
                ]
            )
    arms = [
        {
            "arm": r["arm"],
            "seeds": r["seeds"],
            **{
                m: (f"{r[m]:.4f} ± {r[m + ' sd']:.4f}" if math.isfinite(r[m]) else "—")
                for m in COLUMNS
            },
        }
        for r in result["arms"]
    ]
    diffs = [
        {
            "hypothesis": r["hypothesis"],
            "difference": r["difference"],
            "metric": r["metric"],
            "seeds": r["seeds"],
            "mean": _fmt(r["mean"]),
            "t interval (level)": f"[{_fmt(r['low'])}, {_fmt(r['high'])}] ({r['level']:.4f})",
            "p": f"{r['p']:.3g}",
            "bootstrap 95 %": (
                f"[{_fmt(r['bootstrap low'])}, {_fmt(r['bootstrap high'])}]"
                if math.isfinite(r["bootstrap low"])
                else ""
            ),
            "checks": r["checks"],
        }
        for r in result["differences"]
    ]
    text = "\n\n".join(
        [
            "## Checks\n\n" + markdown_table(result["checks"], list(result["checks"][0])),
            "## Arms (mean ± seed sd)\n\n" + markdown_table(arms, list(arms[0])),
            "## Paired differences\n\n" + (markdown_table(diffs, list(diffs[0])) if diffs else ""),
            "## Verdicts\n\n" + "\n".join(f"- {h}: {v}" for h, v in result["verdicts"].items()),
        ]
    )
    (out / "summary.md").write_text(text + "\n")
    return text


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m studies.attribution_study", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--code", type=Path, help="frozen checkout of the registered commit")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--parts", nargs="*", default=["arms", "placement"], choices=["arms", "placement"]
    )
    parser.add_argument(
        "--rerun",
        nargs="*",
        default=[],
        metavar="ARM:SEED",
        help="rerun these runs of arms A-F (e.g. B_signorm_M1:1) after a failed check",
    )
    parser.add_argument("--analysis-only", action="store_true")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    if not args.analysis_only:
        if args.code is None:
            parser.error("--code is required to train")
        run_study(args.code, out / "runs", args.jobs, args.parts, args.rerun)
    print(write_artefacts(out / "runs", out))


if __name__ == "__main__":
    main()
