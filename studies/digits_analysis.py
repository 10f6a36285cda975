"""The digits study's analysis: mechanism checks, the pre-registered statistics and verdicts.

Reads the kept runs of :mod:`~studies.digits_study` (``results.csv``,
``settings.json``, ``trajectory.csv``, and the methods runs' member probabilities) and writes
``summary.md`` (every table), ``claims.csv`` (one verdict per claim, by the rules of
``studies/results/digits_study/README.md``), ``checks.csv`` (divergence and convergence of every
run),
``runs.csv`` (one row of metrics per run) and the figures. Nothing is trained here::

    python -m studies.digits_study --out studies/results/digits_study --figures-only
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from matplotlib.figure import Figure
from safetensors.torch import load_file
from scipy import stats
from sklearn.metrics import roc_auc_score

from signorm_lab.reproduction.results_table import write_rows
from signorm_lab.reproduction.runs import Run, find_runs
from signorm_lab.reproduction.tables import markdown_table
from torch_uncertainty_signorm.evaluation.diversity import mutual_information

from . import digits_design as study
from .figures import save_figure
from .stats import (
    correlation_ratio,
    least_squares_change,
    mean_interval,
    paired_difference,
    spearman_interval,
    welch_difference,
    within_group_spearman,
)

__all__ = ["CONVERGENCE", "METRICS", "checks", "near_ood_aurocs", "write_artefacts"]

#: Short name -> (results.csv column, scale of the reported value).
METRICS = {
    "Acc": ("test/cls/Acc", 100),
    "NLL": ("test/cls/NLL", 1),
    "ECE": ("test/cal/ECE", 100),
    "cos": ("test/div/signorm_cos", 1),
    "cos_reg": ("test/div/signorm_cos_regularized", 1),
    "JG": ("test/div/jensen_gap", 1),
    "MI": ("test/ens_MI", 1),
    "near_AUROC": ("ood_near/AUROC", 100),
    "far_AUROC": ("ood_far/AUROC", 100),
    "shift_ECE": ("shift/mean/ECE", 100),
    "shift_Acc": ("shift/mean/Acc", 100),
    "shift_NLL": ("shift/mean/NLL", 1),
    **{f"s{k}_ECE": (f"shift/s{k}/ECE", 100) for k in range(1, 6)},
    **{f"s{k}_Acc": (f"shift/s{k}/Acc", 100) for k in range(1, 6)},
}
#: Convergence check: largest least-squares change over the last 20 % of steps.
CONVERGENCE = {"val/cls/NLL": 0.02, "train/signorm_cos": 0.01}
DIVERGED = 0.99  # regularized-layer σNorm-cos below this: the members are not one model
NLL_MARGIN, ACC_MARGIN, ECE_MARGIN = 0.02, 1.0, 1.0


def value(run: Run, name: str) -> float:
    column, scale = METRICS[name]
    return float(run.metrics.get(column, math.nan)) * scale


def _is(
    run: Run,
    method: str,
    members: int | None = None,
    tau: float | None = None,
    strength: float | None = None,
) -> bool:
    def close(a: Any, b: float) -> bool:
        return a is not None and math.isclose(float(a), b, rel_tol=1e-6, abs_tol=1e-12)

    return (
        run.get("method") == method
        and (members is None or run.get("num_estimators") == members)
        and (tau is None or close(run.get("tau"), tau))
        and (strength is None or close(run.get("diversity_strength"), strength))
    )


def select(runs: Sequence[Run], method: str, **settings) -> list[Run]:
    """The runs of ``method`` with those settings, in seed order."""
    return sorted((r for r in runs if _is(r, method, **settings)), key=lambda r: r.get("seed"))


def _values(runs: Sequence[Run], name: str) -> list[float]:
    return [value(r, name) for r in runs]


class MissingRuns(Exception):
    """A claim's runs are not all there yet (the study is still training)."""


def _require(groups: dict, minimum: int, claim: str) -> None:
    short = {str(k): len(v) for k, v in groups.items() if len(v) < minimum}
    if short:
        raise MissingRuns(f"{claim}: groups with fewer than {minimum} runs: {short}")


# ------------------------------------------------------------------ mechanism checks
def checks(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Per run: regularized σNorm-cos (σN-Ens), and the least-squares change of the
    validation NLL and training σNorm-cos over the last 20 % of steps, with pass/fail."""
    rows = []
    for run in runs:
        trajectory = run.path.parent / study.TRAJECTORY
        row = {"run": f"{run.path.parent.parent.name}/{run.path.parent.name}"}
        if run.get("method") == "signorm":
            row["cos_reg"] = value(run, "cos_reg")
            row["diverged"] = bool(run.get("diversity_strength") == 0 or row["cos_reg"] < DIVERGED)
        converged = True
        with trajectory.open(newline="") as file:
            rows_t = list(csv.DictReader(file))
        for column, limit in CONVERGENCE.items():
            points = [
                (float(r["step"]), float(r[column]))
                for r in rows_t
                if r.get(column) not in (None, "")
            ]
            if not points:
                continue
            steps, values = zip(*points, strict=True)
            change = least_squares_change(steps, values)
            row[f"change {column}"] = change
            converged &= bool(abs(change) < limit)
        row["converged"] = converged
        rows.append(row)
    return rows


def _failing_share(check_rows: Sequence[dict], names: set[str]) -> float:
    picked = [r for r in check_rows if r["run"] in names]
    failed = [r for r in picked if not r["converged"] or not r.get("diverged", True)]
    return len(failed) / len(picked) if picked else math.nan


def _names(runs: Sequence[Run]) -> set[str]:
    return {f"{r.path.parent.parent.name}/{r.path.parent.name}" for r in runs}


# ------------------------------------------------------------------------- helpers
def _interval_row(label: dict, runs: Sequence[Run], names: Sequence[str]) -> dict[str, Any]:
    row = dict(label) | {"runs": len(runs)}
    for name in names:
        summary = mean_interval(_values(runs, name))
        row[name] = summary["mean"]
        row[f"{name} CI"] = _ci(summary)
    return row


def _ci(summary: dict[str, float]) -> str:
    if math.isnan(summary["low"]):
        return ""
    digits = 4 if abs(summary["mean"]) < 1 else 2
    return f"[{summary['low']:.{digits}f}, {summary['high']:.{digits}f}]"


def _difference_row(label: str, summary: dict[str, float], unit: str = "") -> dict[str, Any]:
    return {
        "comparison": label,
        "difference": summary["mean"],
        "low": summary["low"],
        "high": summary["high"],
        "p": summary.get("p", math.nan),
        "unit": unit,
    }


def _verdict(confirmed: bool, refuted: bool) -> str:
    return "confirmed" if confirmed and not refuted else "refuted" if refuted else "open"


# --------------------------------------------------------------------------- claims
def claim_frontier(runs: Sequence[Run]) -> tuple[dict, list[dict], list[dict]]:
    """C1: NLL/ECE/Acc per τ, ANOVA, the best τ and its Welch tests against the ends."""
    groups = {
        t: select(runs, "signorm", members=4, tau=t, strength=study.LAMBDA) for t in study.TAUS
    }
    zero = select(runs, "signorm", members=4, strength=0.0)
    _require(groups, len(study.FEW_SEEDS), "C1")
    table = [
        _interval_row(
            {"tau": t, "lambda": study.LAMBDA},
            g,
            ["Acc", "NLL", "ECE", "cos", "cos_reg", "JG", "MI"],
        )
        for t, g in groups.items()
    ]
    if zero:
        table.append(
            _interval_row(
                {"tau": "–", "lambda": 0.0},
                zero,
                ["Acc", "NLL", "ECE", "cos", "cos_reg", "JG", "MI"],
            )
        )
    nll = {t: _values(g, "NLL") for t, g in groups.items()}
    anova = {
        m: float(stats.f_oneway(*[_values(g, m) for g in groups.values()]).pvalue)
        for m in ("NLL", "ECE", "Acc")
    }
    best = min(nll, key=lambda t: np.mean(nll[t]))
    ends, interior = (study.TAUS[0], study.TAUS[-1]), study.TAUS[1:-1]
    tests = []
    if best in interior:
        against = [welch_difference(nll[best], nll[e], alternative="less") for e in ends]
        tests += [
            _difference_row(f"NLL τ*={best:g} − τ={e:g} (one-sided p)", s)
            for e, s in zip(ends, against, strict=True)
        ]
        confirmed = anova["NLL"] < 0.05 and all(s["p"] < 0.05 for s in against)
        refuted = False
    else:
        best_interior = min(interior, key=lambda t: np.mean(nll[t]))
        test = welch_difference(nll[best], nll[best_interior], alternative="less")
        tests.append(
            _difference_row(f"NLL τ={best:g} (end) − τ={best_interior:g} (one-sided p)", test)
        )
        confirmed, refuted = False, test["p"] < 0.05
    means = {t: np.mean(v) for t, v in nll.items()}
    high, low = max(means, key=means.get), min(means, key=means.get)
    spread = welch_difference(nll[high], nll[low])
    tests.append(_difference_row(f"largest gap in NLL: τ={high:g} − τ={low:g}", spread))
    if anova["NLL"] >= 0.05 and spread["high"] < NLL_MARGIN and spread["low"] > -NLL_MARGIN:
        refuted = True
    verdict = {
        "claim": "C1 frontier with an interior optimum in τ",
        "verdict": _verdict(confirmed, refuted),
        "numbers": (
            f"ANOVA p: NLL {anova['NLL']:.3g}, ECE {anova['ECE']:.3g}, "
            f"Acc {anova['Acc']:.3g}; lowest mean NLL at τ = {best:g}"
        ),
        "runs": _names([r for g in groups.values() for r in g]),
    }
    return verdict, table, tests


def claim_correlation(runs: Sequence[Run]) -> tuple[dict, list[dict], list[dict]]:
    """C2: Spearman ρ of σNorm-cos and output diversity over the τ part, with η and ρ within τ."""
    _require(
        {t: select(runs, "signorm", members=4, tau=t, strength=study.LAMBDA) for t in study.TAUS},
        len(study.FEW_SEEDS),
        "C2",
    )
    sweep = [
        r
        for t in study.TAUS
        for r in select(runs, "signorm", members=4, tau=t, strength=study.LAMBDA)
    ]
    taus = [r.get("tau") for r in sweep]
    rows, points = [], []
    for x_name in ("cos", "cos_reg"):
        for y_name in ("JG", "MI"):
            x, y = _values(sweep, x_name), _values(sweep, y_name)
            rho = spearman_interval(x, y)
            within = within_group_spearman(x, y, taus)
            rows.append(
                {
                    "σNorm-cos": "all layers" if x_name == "cos" else "regularized",
                    "output diversity": "Jensen gap" if y_name == "JG" else "MI",
                    "n": rho["n"],
                    "spearman": rho["rho"],
                    "low": rho["low"],
                    "high": rho["high"],
                    "p": rho["p"],
                    "pearson": float(stats.pearsonr(x, y).statistic),
                    "η (y on τ)": correlation_ratio(y, taus),
                    "η ranks": correlation_ratio(stats.rankdata(y), taus),
                    "ρ within τ": within["rho"],
                    "p within τ": within["p"],
                }
            )
    for run in sweep:
        points.append(
            {
                "run": f"{run.path.parent.parent.name}/{run.path.parent.name}",
                "tau": run.get("tau"),
                **{n: value(run, n) for n in ("cos", "cos_reg", "JG", "MI")},
            }
        )
    main = rows[0]
    magnitude = abs(main["spearman"])
    bounds = (
        sorted([abs(main["low"]), abs(main["high"])])
        if main["low"] * main["high"] > 0
        else [0.0, max(abs(main["low"]), abs(main["high"]))]
    )
    verdict = {
        "claim": "C2 |ρ(σNorm-cos, Jensen gap)| ≥ 0.87",
        "verdict": _verdict(magnitude >= 0.87 and bounds[0] > 0.70, bounds[1] < 0.87),
        "numbers": (
            f"ρ = {main['spearman']:.2f} [{main['low']:.2f}, {main['high']:.2f}], "
            f"η of the Jensen gap on τ = {main['η (y on τ)']:.2f}, "
            f"ρ within τ = {main['ρ within τ']:.2f}"
        ),
        "runs": _names(sweep),
    }
    return verdict, rows, points


def _fit(cos: np.ndarray, log_l: np.ndarray, log_t: np.ndarray) -> np.ndarray:
    design = np.column_stack([np.ones_like(log_l), log_l, log_t])
    return np.linalg.lstsq(design, cos, rcond=None)[0]


def claim_lambda(runs: Sequence[Run]) -> tuple[dict, list[dict], list[dict]]:
    """C3: λ = 1e-1 minus λ = 1e-3 (paired by τ and seed); σNorm-cos fitted on log λ, log τ."""
    grid = {
        (lam, t): select(runs, "signorm", members=4, tau=t, strength=lam)
        for lam in study.LAMBDAS
        for t in study.LAMBDA_TAUS
    }
    grid = {k: [r for r in v if r.get("seed") in study.FEW_SEEDS] for k, v in grid.items()}
    _require(grid, len(study.FEW_SEEDS), "C3")
    table = [
        _interval_row(
            {"lambda": lam, "tau": t, "λ/τ²": lam / t**2}, g, ["Acc", "NLL", "ECE", "cos_reg", "JG"]
        )
        for (lam, t), g in grid.items()
    ]
    high = [r for t in study.LAMBDA_TAUS for r in grid[(study.LAMBDAS[-1], t)]]
    low = [r for t in study.LAMBDA_TAUS for r in grid[(study.LAMBDAS[0], t)]]
    pairs = [
        (a, b)
        for a in high
        for b in low
        if a.get("tau") == b.get("tau") and a.get("seed") == b.get("seed")
    ]
    tests = []
    acc = paired_difference(
        [value(a, "Acc") for a, _ in pairs], [value(b, "Acc") for _, b in pairs]
    )
    nll = paired_difference(
        [value(a, "NLL") for a, _ in pairs], [value(b, "NLL") for _, b in pairs]
    )
    tests += [
        _difference_row("Acc λ=0.1 − λ=0.001 (points)", acc, "points"),
        _difference_row("NLL λ=0.1 − λ=0.001", nll, "nats"),
    ]
    within = lambda s, m: -m < s["low"] and s["high"] < m  # noqa: E731
    outside = lambda s, m: s["low"] > m or s["high"] < -m  # noqa: E731
    performance = _verdict(
        within(acc, ACC_MARGIN) and within(nll, NLL_MARGIN),
        outside(acc, ACC_MARGIN) or outside(nll, NLL_MARGIN),
    )

    everything = [r for g in grid.values() for r in g]
    cos = np.array(_values(everything, "cos_reg"))
    log_l = np.log10([r.get("diversity_strength") for r in everything])
    log_t = np.log10([r.get("tau") for r in everything])
    b = _fit(cos, log_l, log_t)

    def slopes(*resample: np.ndarray) -> np.ndarray:  # b_λ / b_τ, b_λ, b_τ, b_τ + 2 b_λ
        _, b_lambda, b_tau = _fit(*resample)
        return np.array([b_lambda / b_tau, b_lambda, b_tau, b_tau + 2 * b_lambda])

    boot = stats.bootstrap(  # runs resampled with their (log λ, log τ): a percentile interval
        (cos, log_l, log_t),
        slopes,
        paired=True,
        vectorized=False,
        n_resamples=9999,
        method="percentile",
        random_state=np.random.default_rng(0),
    ).confidence_interval
    r_ci, bl_ci, bt_ci, combo_ci = zip(boot.low.tolist(), boot.high.tolist(), strict=True)
    ratio = b[1] / b[2] if b[2] != 0 else math.nan
    tests += [
        {
            "comparison": "b_λ (σNorm-cos_reg per decade of λ)",
            "difference": b[1],
            "low": bl_ci[0],
            "high": bl_ci[1],
            "p": math.nan,
            "unit": "",
        },
        {
            "comparison": "b_τ (σNorm-cos_reg per decade of τ)",
            "difference": b[2],
            "low": bt_ci[0],
            "high": bt_ci[1],
            "p": math.nan,
            "unit": "",
        },
        {
            "comparison": "r = b_λ / b_τ (0: τ alone; −0.5: λ/τ²)",
            "difference": ratio,
            "low": r_ci[0],
            "high": r_ci[1],
            "p": math.nan,
            "unit": "",
        },
        {
            "comparison": "b_τ + 2 b_λ (0 under the λ/τ² account)",
            "difference": b[2] + 2 * b[1],
            "low": combo_ci[0],
            "high": combo_ci[1],
            "p": math.nan,
            "unit": "",
        },
    ]
    moved = not (bl_ci[0] <= 0 <= bl_ci[1] and bt_ci[0] <= 0 <= bt_ci[1])
    contains = lambda ci, x: ci[0] <= x <= ci[1]  # noqa: E731
    equilibrium = (
        "open"
        if not moved
        else _verdict(contains(r_ci, 0.0) and not contains(r_ci, -0.5), not contains(r_ci, 0.0))
    )
    verdict_a = {
        "claim": "C3a λ-insensitivity of Acc and NLL",
        "verdict": performance,
        "numbers": (
            f"λ 0.1 − 0.001: Acc {acc['mean']:+.2f} [{acc['low']:+.2f}, "
            f"{acc['high']:+.2f}] points, NLL {nll['mean']:+.4f} "
            f"[{nll['low']:+.4f}, {nll['high']:+.4f}]"
        ),
        "runs": _names(everything),
    }
    verdict_b = {
        "claim": "C3b τ sets the equilibrium independently of λ",
        "verdict": equilibrium,
        "numbers": (
            f"b_λ = {b[1]:+.4f} [{bl_ci[0]:+.4f}, {bl_ci[1]:+.4f}], b_τ = "
            f"{b[2]:+.4f} [{bt_ci[0]:+.4f}, {bt_ci[1]:+.4f}], r = {ratio:+.2f} "
            f"[{r_ci[0]:+.2f}, {r_ci[1]:+.2f}]"
        ),
        "runs": _names(everything),
    }
    return (verdict_a, verdict_b), table, tests


def claim_members(runs: Sequence[Run]) -> tuple[dict, list[dict], list[dict]]:
    """C4: NLL per M for σN-Ens (τ = 0.5) and Packed; M = 16 against M = 4 and each other."""

    def group(method: str, m: int) -> list[Run]:
        if method == "signorm":
            return select(
                runs,
                "signorm",
                members=m,
                tau=study.MEMBERS_TAU,
                strength=study.LAMBDA * study.NUM_ESTIMATORS / m,
            )
        return select(runs, "packed", members=m)

    _require(
        {(method, m): group(method, m) for method in ("signorm", "packed") for m in study.MEMBERS},
        len(study.FEW_SEEDS),
        "C4",
    )
    table = [
        _interval_row(
            {"method": study.LABELS[method], "M": m},
            group(method, m),
            ["Acc", "NLL", "ECE", "near_AUROC", "shift_ECE"]
            + (["cos_reg", "MI"] if method == "signorm" else ["MI"]),
        )
        for method in ("signorm", "packed")
        for m in study.MEMBERS
    ]
    nll = {
        (method, m): _values(group(method, m), "NLL")
        for method in ("signorm", "packed")
        for m in study.MEMBERS
    }
    d_sn = welch_difference(nll[("signorm", 16)], nll[("signorm", 4)])
    d_p = welch_difference(nll[("packed", 16)], nll[("packed", 4)])
    d_16 = welch_difference(nll[("signorm", 16)], nll[("packed", 16)])
    d_2 = welch_difference(nll[("signorm", 2)], nll[("packed", 2)])
    tests = [
        _difference_row("σN-Ens NLL M=16 − M=4", d_sn, "nats"),
        _difference_row("Packed NLL M=16 − M=4", d_p, "nats"),
        _difference_row("NLL σN-Ens − Packed at M=16", d_16, "nats"),
        _difference_row("NLL σN-Ens − Packed at M=2", d_2, "nats"),
    ]
    confirmed = d_sn["high"] < NLL_MARGIN and d_p["low"] > 0 and d_16["high"] < 0
    refuted = d_sn["low"] > NLL_MARGIN or d_p["high"] <= 0 or d_16["low"] > 0
    verdict = {
        "claim": "C4 member scaling: σN-Ens holds, Packed degrades",
        "verdict": _verdict(confirmed, refuted),
        "numbers": (
            f"σN-Ens M16−M4 {d_sn['mean']:+.3f} [{d_sn['low']:+.3f}, "
            f"{d_sn['high']:+.3f}]; Packed M16−M4 {d_p['mean']:+.3f} "
            f"[{d_p['low']:+.3f}, {d_p['high']:+.3f}]; σN-Ens−Packed at M16 "
            f"{d_16['mean']:+.3f} [{d_16['low']:+.3f}, {d_16['high']:+.3f}]"
        ),
        "runs": _names([r for (method, m) in nll for r in group(method, m)]),
    }
    return verdict, table, tests


def _methods(runs: Sequence[Run]) -> dict[str, list[Run]]:
    return {
        "Single": select(runs, "single"),
        "Deep Ensembles": select(runs, "deep_ensembles", members=4),
        "Packed": select(runs, "packed", members=4),
        "σN-Ens": select(runs, "signorm", members=4, tau=study.TAU, strength=study.LAMBDA),
    }


def claim_shift(runs: Sequence[Run]) -> tuple[dict, list[dict], list[dict]]:
    """C5: ECE per severity; σN-Ens against Single and Deep Ensembles, paired by seed."""
    methods = _methods(runs)
    _require({k: v for k, v in methods.items() if k != "Packed"}, len(study.SEEDS), "C5")
    methods = {k: v for k, v in methods.items() if v}
    table = [
        _interval_row(
            {"method": name}, group, [f"s{k}_ECE" for k in range(1, 6)] + ["shift_ECE", "shift_Acc"]
        )
        for name, group in methods.items()
    ]
    sn, single, de = methods["σN-Ens"], methods["Single"], methods["Deep Ensembles"]

    def slope(run: Run) -> float:
        return float(np.polyfit(range(1, 6), [value(run, f"s{k}_ECE") for k in range(1, 6)], 1)[0])

    d_single = paired_difference(_values(sn, "shift_ECE"), _values(single, "shift_ECE"))
    d_de = paired_difference(_values(sn, "shift_ECE"), _values(de, "shift_ECE"))
    tests = [
        _difference_row("shift ECE σN-Ens − Single", d_single, "points"),
        _difference_row("shift ECE σN-Ens − Deep Ensembles", d_de, "points"),
    ]
    for k in range(1, 6):
        tests.append(
            _difference_row(
                f"s{k} ECE σN-Ens − Deep Ensembles",
                paired_difference(_values(sn, f"s{k}_ECE"), _values(de, f"s{k}_ECE")),
                "points",
            )
        )
    tests += [
        _difference_row(
            "ECE slope per severity σN-Ens − Single",
            paired_difference([slope(r) for r in sn], [slope(r) for r in single]),
            "points",
        ),
        _difference_row(
            "ECE slope per severity σN-Ens − Deep Ensembles",
            paired_difference([slope(r) for r in sn], [slope(r) for r in de]),
            "points",
        ),
    ]
    confirmed = d_single["high"] < 0 and d_de["high"] < ECE_MARGIN
    refuted = d_single["low"] >= 0 or d_de["low"] > ECE_MARGIN
    verdict = {
        "claim": "C5 DE-level ECE under corruption, below Single's",
        "verdict": _verdict(confirmed, refuted),
        "numbers": (
            f"mean shift ECE σN-Ens − Single {d_single['mean']:+.2f} "
            f"[{d_single['low']:+.2f}, {d_single['high']:+.2f}] points; "
            f"σN-Ens − DE {d_de['mean']:+.2f} [{d_de['low']:+.2f}, "
            f"{d_de['high']:+.2f}]"
        ),
        "runs": _names(sn + single + de),
    }
    return verdict, table, tests


def near_ood_aurocs(run_dir: Path) -> dict[str, float]:
    """Near-OOD AUROC (%) from a run's saved member probabilities, scored by maximum softmax
    probability and by mutual information (OOD = positive class)."""
    saved = load_file(Path(run_dir) / study.PREDICTIONS)
    id_probs, ood_probs = saved["probs/0"].double(), saved["probs/1"].double()
    labels = np.r_[np.zeros(id_probs.shape[1]), np.ones(ood_probs.shape[1])]
    scores: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "MSP": lambda p: -p.mean(0).max(-1).values,
        "MI": mutual_information,
    }
    row = {}
    for name, score in scores.items():
        values = torch.cat([score(id_probs), score(ood_probs)]).numpy()
        row[name] = 100 * float(roc_auc_score(labels, values)) if np.ptp(values) > 0 else math.nan
    return row


def claim_ood(runs: Sequence[Run]) -> tuple[dict, list[dict], list[dict]]:
    """C6 and the methods table: near/far OOD AUROC, σN-Ens against Deep Ensembles."""
    methods = _methods(runs)
    _require({k: v for k, v in methods.items() if k != "Packed"}, len(study.SEEDS), "C6")
    methods = {k: v for k, v in methods.items() if v}
    mi = {
        name: [near_ood_aurocs(r.path.parent)["MI"] for r in group]
        for name, group in methods.items()
        if name != "Single"
    }
    table = []
    for name, group in methods.items():
        row = _interval_row(
            {"method": name}, group, ["Acc", "NLL", "ECE", "near_AUROC", "far_AUROC", "shift_ECE"]
        )
        if name in mi:
            summary = mean_interval(mi[name])
            row["near_AUROC_MI"], row["near_AUROC_MI CI"] = summary["mean"], _ci(summary)
        row["params"] = group[0].metrics.get("test/cplx/params", math.nan) if group else math.nan
        row["run (s)"] = float(np.mean([r.get("run_seconds") or math.nan for r in group]))
        table.append(row)
    sn, de, single = methods["σN-Ens"], methods["Deep Ensembles"], methods["Single"]
    msp = paired_difference(_values(sn, "near_AUROC"), _values(de, "near_AUROC"))
    by_mi = paired_difference(mi["σN-Ens"], mi["Deep Ensembles"])
    tests = [
        _difference_row("near-OOD AUROC (MSP) σN-Ens − Deep Ensembles", msp, "points"),
        _difference_row("near-OOD AUROC (MI) σN-Ens − Deep Ensembles", by_mi, "points"),
        _difference_row(
            "far-OOD AUROC (MSP) σN-Ens − Deep Ensembles",
            paired_difference(_values(sn, "far_AUROC"), _values(de, "far_AUROC")),
            "points",
        ),
    ]
    for metric, unit in (("Acc", "points"), ("NLL", "nats"), ("ECE", "points")):
        for other, group in (("Single", single), ("Deep Ensembles", de)):
            tests.append(
                _difference_row(
                    f"{metric} σN-Ens − {other}",
                    paired_difference(_values(sn, metric), _values(group, metric)),
                    unit,
                )
            )
    verdict = {
        "claim": "C6 near-OOD detection weaker than Deep Ensembles",
        "verdict": _verdict(msp["high"] < 0, msp["low"] > 0),
        "numbers": (
            f"AUROC σN-Ens − DE: MSP {msp['mean']:+.1f} [{msp['low']:+.1f}, "
            f"{msp['high']:+.1f}] points, MI {by_mi['mean']:+.1f} "
            f"[{by_mi['low']:+.1f}, {by_mi['high']:+.1f}]"
        ),
        "runs": _names(sn + de),
    }
    return verdict, table, tests


# -------------------------------------------------------------------------- figures
def _figure_frontier(table: Sequence[dict]) -> Figure:
    figure = Figure(figsize=(10, 3.4))
    axes = figure.subplots(1, 3)
    rows = [r for r in table if r["lambda"] != 0.0]
    taus = [r["tau"] for r in rows]
    for ax, name in zip(axes[:2], ("NLL", "ECE"), strict=True):
        means = [r[name] for r in rows]
        errors = [
            [
                m - float(r[f"{name} CI"].strip("[]").split(",")[0])
                for m, r in zip(means, rows, strict=True)
            ],
            [
                float(r[f"{name} CI"].strip("[]").split(",")[1]) - m
                for m, r in zip(means, rows, strict=True)
            ],
        ]
        ax.errorbar(taus, means, yerr=errors, marker="o", capsize=3)
        ax.set_xscale("log")
        ax.set_xlabel("τ")
        ax.set_ylabel(f"test {name}" + (" (%)" if name == "ECE" else ""))
    scatter = axes[2].scatter(
        [r["ECE"] for r in rows], [r["Acc"] for r in rows], c=np.log10(taus), cmap="viridis"
    )
    axes[2].set_xlabel("test ECE (%)")
    axes[2].set_ylabel("test accuracy (%)")
    figure.colorbar(scatter, ax=axes[2], label="log10 τ")
    figure.suptitle("σN-Ens, M = 4, λ = 1e-2: mean and 95 % interval over seeds (3; τ = 0.1: 5)")
    figure.tight_layout()
    return figure


def _figure_correlation(points: Sequence[dict]) -> Figure:
    figure = Figure(figsize=(8, 3.4))
    axes = figure.subplots(1, 2)
    for ax, x_name, label in ((axes[0], "cos", "all layers"), (axes[1], "cos_reg", "regularized")):
        scatter = ax.scatter(
            [p[x_name] for p in points],
            [p["JG"] for p in points],
            c=np.log10([p["tau"] for p in points]),
            cmap="viridis",
        )
        ax.set_xlabel(f"σNorm-cos ({label})")
        ax.set_ylabel("Jensen gap (nats)")
    figure.colorbar(scatter, ax=axes[1], label="log10 τ")
    figure.tight_layout()
    return figure


def _figure_lines(
    table: Sequence[dict], x: str, groups: str, names: Sequence[str], log_x: bool = False
) -> Figure:
    figure = Figure(figsize=(4 * len(names), 3.4))
    axes = np.atleast_1d(figure.subplots(1, len(names)))
    for ax, name in zip(axes, names, strict=True):
        for label in dict.fromkeys(r[groups] for r in table):
            rows = [r for r in table if r[groups] == label]
            ax.plot([r[x] for r in rows], [r[name] for r in rows], marker="o", label=str(label))
        if log_x:
            ax.set_xscale("log")
        ax.set_xlabel(x)
        ax.set_ylabel(name)
    axes[0].legend(title=groups, fontsize=8)
    figure.tight_layout()
    return figure


def _figure_shift(table: Sequence[dict]) -> Figure:
    figure = Figure(figsize=(5, 3.4))
    ax = figure.subplots()
    for row in table:
        ax.plot(
            range(1, 6), [row[f"s{k}_ECE"] for k in range(1, 6)], marker="o", label=row["method"]
        )
    ax.set_xlabel("corruption severity (noise, blur, translation)")
    ax.set_ylabel("ECE (%), mean over seeds")
    ax.legend(fontsize=8)
    figure.tight_layout()
    return figure


# ------------------------------------------------------------------------- the whole
def _per_run(runs: Sequence[Run]) -> list[dict]:
    rows = []
    for run in runs:
        rows.append(
            {
                "run": f"{run.path.parent.parent.name}/{run.path.parent.name}",
                "method": run.get("method"),
                "M": run.get("num_estimators"),
                "tau": run.get("tau"),
                "lambda": run.get("diversity_strength"),
                "seed": run.get("seed"),
                "run_seconds": run.get("run_seconds"),
            }
            | {name: value(run, name) for name in METRICS}
        )
    return rows


def write_artefacts(runs_dir: Path, out: Path) -> str:
    """Every table, figure and verdict of the study from the kept runs; returns summary.md.

    A claim whose runs are not all there yet is listed as "not run yet" with what is missing.
    """
    out.mkdir(parents=True, exist_ok=True)
    runs = find_runs([runs_dir])
    check_rows = checks(runs)
    write_rows(check_rows, out / "checks.csv")
    write_rows(_per_run(runs), out / "runs.csv")
    verdicts, sections = [], []
    failing = [r for r in check_rows if not r["converged"] or not r.get("diverged", True)]
    total = sum(r.get("run_seconds") or 0 for r in runs)
    sections.append(
        f"## Runs and checks\n\n{len(runs)} runs, {total / 60:.0f} minutes of wall time (one "
        f"thread each, two at a time on a shared machine). Runs failing the divergence or "
        f"convergence check: {len(failing)}"
        + "".join(
            f"\n- {r['run']}: "
            + ", ".join(
                f"{k} {v:+.4f}" if isinstance(v, float) else f"{k} {v}"
                for k, v in r.items()
                if k != "run"
            )
            for r in failing
        )
        + "\n"
    )

    def frontier(v, table, tests):
        write_rows(table, out / "tau_frontier.csv")
        save_figure(_figure_frontier(table), out, "tau_frontier", pdf=False)
        return [
            "## C1 — τ sweep (σN-Ens, M = 4; mean and 95 % t interval over seeds)\n",
            markdown_table(table, list(table[0])),
            markdown_table(tests, list(tests[0])),
        ]

    def correlation(v, rows, points):
        write_rows(rows, out / "diversity_correlations.csv")
        write_rows(points, out / "diversity_points.csv")
        save_figure(_figure_correlation(points), out, "diversity_correlations", pdf=False)
        return [
            (f"## C2 — σNorm-cos against output diversity ({len(points)} runs of the τ sweep)\n"),
            markdown_table(rows, list(rows[0])),
        ]

    def lambda_grid(v, table, tests):
        write_rows(table, out / "lambda_tau.csv")
        save_figure(
            _figure_lines(table, "tau", "lambda", ["cos_reg", "NLL", "Acc"], log_x=True),
            out,
            "lambda_tau",
            pdf=False,
        )
        return [
            "## C3 — λ × τ grid (σN-Ens, M = 4, 3 seeds)\n",
            markdown_table(table, list(table[0])),
            markdown_table(tests, list(tests[0])),
        ]

    def members(v, table, tests):
        write_rows(table, out / "member_scaling.csv")
        save_figure(
            _figure_lines(table, "M", "method", ["NLL", "Acc", "ECE"]),
            out,
            "member_scaling",
            pdf=False,
        )
        return [
            "## C4 — member scaling (σN-Ens at τ = 0.5, λ = 1e-2·4/M; Packed; 3 seeds)\n",
            markdown_table(table, list(table[0])),
            markdown_table(tests, list(tests[0])),
        ]

    def shift(v, table, tests):
        write_rows(table, out / "shift.csv")
        save_figure(_figure_shift(table), out, "shift_ece", pdf=False)
        return [
            "## C5 — ECE under corruption (mean over noise, blur, translation)\n",
            markdown_table(table, list(table[0])),
            markdown_table(tests, list(tests[0])),
        ]

    def ood(v, table, tests):
        write_rows(table, out / "methods.csv")
        return [
            "## C6 and the methods (M = 4; Packed 3 seeds, the others 5)\n",
            markdown_table(table, list(table[0])),
            markdown_table(tests, list(tests[0])),
        ]

    claims = [
        ("C1 frontier with an interior optimum in τ", claim_frontier, frontier),
        ("C2 |ρ(σNorm-cos, Jensen gap)| ≥ 0.87", claim_correlation, correlation),
        ("C3 λ-insensitivity (a: Acc/NLL, b: equilibrium)", claim_lambda, lambda_grid),
        ("C4 member scaling: σN-Ens holds, Packed degrades", claim_members, members),
        ("C5 DE-level ECE under corruption, below Single's", claim_shift, shift),
        ("C6 near-OOD detection weaker than Deep Ensembles", claim_ood, ood),
    ]
    for name, claim, write in claims:
        try:
            verdict, *rest = claim(runs)
        except MissingRuns as missing:
            verdicts.append(
                {"claim": name, "verdict": "not run yet", "numbers": str(missing), "runs": set()}
            )
            continue
        verdicts += list(verdict) if isinstance(verdict, tuple) else [verdict]
        sections += write(verdict, *rest)

    for verdict in verdicts:
        names = verdict.pop("runs")
        share = _failing_share(check_rows, names) if names else math.nan
        verdict["runs failing a check"] = "" if math.isnan(share) else f"{100 * share:.0f} %"
        if share > 0.10:
            verdict["verdict"] = f"open (checks; registered statistic: {verdict['verdict']})"
    write_rows(verdicts, out / "claims.csv")
    text = "\n".join(
        [
            "# Digits study: numbers\n",
            (
                "Generated by `python -m studies.digits_study`; "
                "the rules behind each verdict are in README.md.\n"
            ),
            "## Verdicts\n",
            markdown_table(verdicts, list(verdicts[0])),
            *sections,
        ]
    )
    (out / "summary.md").write_text(text)
    return text
