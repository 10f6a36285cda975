r"""The paper's sweep tables and figures, from the ``results.csv`` files of sweep runs.

One sub-command per artefact; each writes a CSV and a figure (PNG, and PDF with
``--pdf``) into ``--out``::

    python -m studies.figures frontier  runs/tau     --out figs
    python -m studies.figures diversity runs/tau     --out figs
    python -m studies.figures members   runs/members --out figs
    python -m studies.figures lambda    runs/lambda  --out figs
    python -m studies.figures shift     logs/*/signorm --out figs
    python -m studies.figures ownership runs/tau     --out figs

* ``frontier``: accuracy–calibration frontier of a τ sweep (mean ± std over seeds per τ);
* ``diversity``: σNorm-cos against the Jensen gap, mutual information and geometric
  ambiguity over every run of a τ sweep, with Pearson and Spearman ρ (the four-metric table);
* ``members``: Acc, NLL, ECE and AUROC against M for σN-Ens and Packed-Ensembles;
* ``lambda``: the λ robustness table (Acc / NLL / ECE per λ);
* ``shift``: ECE (and Acc, NLL) against corruption severity from ``shift/s{k}/*``;
* ``ownership``: importance histograms and ownership embeddings of runs that saved their
  importances (``importances.safetensors``), drawn with
  :class:`~torch_uncertainty_signorm.callbacks.MemberOwnershipCallback`'s figures.

Runs are grouped by their settings (``settings.json`` or the saved ``config.yaml``; see
:func:`~signorm_lab.reproduction.runs.read_settings`).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from scipy import stats

from signorm_lab.evaluation.eval_sets import SEVERITIES
from signorm_lab.reproduction.results_table import mean_std, write_rows
from signorm_lab.reproduction.runs import Run, find_runs, iter_groups

from .stats import spearman_p

__all__ = [
    "diversity_correlations",
    "frontier",
    "lambda_table",
    "member_scaling",
    "ownership",
    "save_figure",
    "severity_curves",
]

#: Output-space diversity measures set against σNorm-cos: TorchUncertainty's mutual
#: information of the ensemble and the routine's ``test/div/*`` measures.
OUTPUT_MEASURES = {
    "MI": "test/ens_MI",
    "jensen_gap": "test/div/jensen_gap",
    "geometric_ambiguity": "test/div/geometric_ambiguity",
}
SIGNORM_COS = "test/div/signorm_cos"
_LABELS = {"signorm": "σN-Ens", "packed": "Packed", "SigmaNormClassificationRoutine": "σN-Ens"}


def save_figure(figure: Figure, out: Path, name: str, pdf: bool) -> list[Path]:
    """Save ``out/name.png`` (and ``.pdf`` when ``pdf``); returns the paths."""
    paths = [out / f"{name}.png"] + ([out / f"{name}.pdf"] if pdf else [])
    for path in paths:
        figure.savefig(path, dpi=150, bbox_inches="tight")
    return paths


def _require(runs: Sequence[Run], setting: str, what: str) -> None:
    missing = [str(r.path) for r in runs if r.get(setting) is None]
    if missing:
        raise ValueError(
            f"{what} needs the {setting!r} setting of every run; missing for "
            f"{missing[:3]} (write it in settings.json next to results.csv)."
        )


def frontier(runs: Sequence[Run]) -> tuple[list[dict[str, Any]], Figure]:
    """Accuracy–calibration frontier of a τ sweep: one point per τ, error bars over seeds."""
    _require(runs, "tau", "the frontier")
    rows = []
    for tau, group in iter_groups(runs, "tau"):
        row = {"tau": tau} | mean_std(group, ["Acc", "ECE", "NLL", SIGNORM_COS])
        rows.append({key.replace(SIGNORM_COS, "signorm_cos"): v for key, v in row.items()})
    figure = Figure(figsize=(4.5, 3.8))
    ax = figure.subplots()
    ece, acc = [r["ECE"] for r in rows], [r["Acc"] for r in rows]
    ax.plot(ece, acc, "-", color="0.6", zorder=1)
    colours = [float(math.log10(r["tau"])) for r in rows]
    ax.errorbar(
        ece,
        acc,
        xerr=[r["ECE_std"] for r in rows],
        yerr=[r["Acc_std"] for r in rows],
        fmt="none",
        ecolor="0.4",
        zorder=2,
    )
    points = ax.scatter(ece, acc, c=colours, cmap="viridis", zorder=3)
    for row in rows:
        ax.annotate(
            f"τ={row['tau']:g}",
            (row["ECE"], row["Acc"]),
            textcoords="offset points",
            xytext=(4, 4),
            fontsize=8,
        )
    figure.colorbar(points, ax=ax, label="log10 τ")
    ax.set_xlabel("ECE (%) ↓")
    ax.set_ylabel("Accuracy (%) ↑")
    ax.set_title("Accuracy–calibration frontier over τ")
    return rows, figure


def diversity_correlations(
    runs: Sequence[Run],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Figure]:
    """σNorm-cos against each output-space diversity measure over a τ sweep.

    Returns the four-metric table, the per-run points and the σNorm-cos–Jensen-gap scatter.
    The table has, per measure, Pearson and Spearman ρ (with p-values; Spearman's exact for
    a handful of points, :func:`~studies.stats.spearman_p`) over every run
    (``points="runs"``: each seed and τ) and, when the runs carry τ and at least 3 values
    of it, over the per-τ means (``points="tau means"``).

    Raises:
        ValueError: With fewer than 3 runs, or if a run lacks ``test/div/signorm_cos``.
    """
    if len(runs) < 3:
        raise ValueError(f"correlations need at least 3 runs, got {len(runs)}.")
    missing = [str(r.path) for r in runs if SIGNORM_COS not in r.metrics]
    if missing:
        raise ValueError(f"runs without {SIGNORM_COS!r} (not σN-Ens runs?): {missing[:3]}.")
    points = [
        {"tau": r.get("tau"), "seed": r.get("seed"), "signorm_cos": r.metrics[SIGNORM_COS]}
        | {name: r.metrics.get(col, math.nan) for name, col in OUTPUT_MEASURES.items()}
        for r in runs
    ]
    taus = [p["tau"] for p in points]
    coloured = all(t is not None for t in taus)
    if coloured:
        points.sort(key=lambda p: (p["tau"], p["seed"] is None, p["seed"]))
    point_sets = {"runs": points}
    if coloured and len(set(taus)) >= 3:
        point_sets["tau means"] = [
            {
                key: statistics.fmean(p[key] for p in points if p["tau"] == tau)
                for key in ("signorm_cos", *OUTPUT_MEASURES)
            }
            for tau in sorted(set(taus))
        ]
    table = []
    for over, chosen in point_sets.items():
        cos = [p["signorm_cos"] for p in chosen]
        for name in OUTPUT_MEASURES:
            values = [p[name] for p in chosen]
            pearson, spearman = stats.pearsonr(cos, values), stats.spearmanr(cos, values)
            table.append(
                {
                    "metric": name,
                    "points": over,
                    "n": len(chosen),
                    "pearson": float(pearson.statistic),
                    "pearson_p": float(pearson.pvalue),
                    "spearman": float(spearman.statistic),
                    "spearman_p": spearman_p(cos, values),
                }
            )
    figure = Figure(figsize=(4.5, 3.8))
    ax = figure.subplots()
    scatter = ax.scatter(
        [p["signorm_cos"] for p in points],
        [p["jensen_gap"] for p in points],
        c=[math.log10(p["tau"]) for p in points] if coloured else None,
        cmap="viridis",
    )
    if coloured:
        figure.colorbar(scatter, ax=ax, label="log10 τ")
    jensen = table[1]
    ax.set_title(f"runs: Pearson ρ={jensen['pearson']:.2f}, Spearman ρ={jensen['spearman']:.2f}")
    ax.set_xlabel("σNorm-cos (all layers)")
    ax.set_ylabel("Jensen gap (nats)")
    return table, points, figure


def _method(run: Run) -> str:
    method = str(run.get("method"))
    return _LABELS.get(method, method)


def member_scaling(runs: Sequence[Run]) -> tuple[list[dict[str, Any]], Figure]:
    """Acc, NLL, ECE and AUROC (mean ± std over seeds) against M, per method."""
    _require(runs, "num_estimators", "member scaling")
    columns = ["Acc", "NLL", "ECE", "AUROC"]
    rows = []
    for method, by_method in iter_groups(runs, "method"):
        for m, group in iter_groups(by_method, "num_estimators"):
            rows.append(
                {"method": _LABELS.get(method, method), "num_estimators": int(m)}
                | mean_std(group, columns)
            )
    figure = Figure(figsize=(12, 3.2))
    axes = figure.subplots(1, len(columns))
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        ms = [r["num_estimators"] for r in mine]
        for ax, column in zip(axes, columns, strict=True):
            mean = [r[column] for r in mine]
            std = [r[f"{column}_std"] for r in mine]
            ax.plot(ms, mean, "o-", label=method)
            ax.fill_between(
                ms,
                [a - s for a, s in zip(mean, std, strict=True)],
                [a + s for a, s in zip(mean, std, strict=True)],
                alpha=0.2,
            )
    for ax, column in zip(axes, columns, strict=True):
        ax.set_xlabel("members M")
        ax.set_title(column + (" (%)" if column != "NLL" else ""))
    axes[0].legend()
    return rows, figure


def lambda_table(runs: Sequence[Run]) -> tuple[list[dict[str, Any]], Figure]:
    """Acc / NLL / ECE per regularization strength λ (``diversity_strength``)."""
    _require(runs, "diversity_strength", "the λ table")
    rows = [
        {"diversity_strength": lam, "tau": group[0].get("tau")}
        | mean_std(group, ["Acc", "NLL", "ECE"])
        for lam, group in iter_groups(runs, "diversity_strength")
    ]
    figure = Figure(figsize=(9, 3))
    axes = figure.subplots(1, 3)
    for ax, column in zip(axes, ["Acc", "NLL", "ECE"], strict=True):
        ax.errorbar(
            [r["diversity_strength"] for r in rows],
            [r[column] for r in rows],
            yerr=[r[f"{column}_std"] for r in rows],
            fmt="o-",
        )
        ax.set_xscale("log")
        ax.set_xlabel("λ")
        ax.set_title(column)
    return rows, figure


def severity_curves(
    runs: Sequence[Run], label: Callable[[Run], str] = _method
) -> tuple[list[dict[str, Any]], Figure]:
    """Acc, NLL and ECE against corruption severity (``shift/s{k}/*``), per method label.

    Raises:
        ValueError: If no run logged per-severity shift metrics.
    """
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(label(run), []).append(run)
    rows = []
    for name, group in groups.items():
        for k in SEVERITIES:
            row = mean_std(group, [f"s{k}/Acc", f"s{k}/NLL", f"s{k}/ECE"])
            if math.isnan(row[f"s{k}/ECE"]):
                continue
            rows.append(
                {"method": name, "severity": k, "runs": row["runs"]}
                | {
                    f"{m}{suffix}": row[f"s{k}/{m}{suffix}"]
                    for m in ("Acc", "NLL", "ECE")
                    for suffix in ("", "_std")
                }
            )
    if not rows:
        raise ValueError("no run logged shift/s{k}/ECE; evaluate with per-severity shift.")
    figure = Figure(figsize=(4.5, 3.5))
    ax = figure.subplots()
    for name in groups:
        mine = [r for r in rows if r["method"] == name]
        ax.errorbar(
            [r["severity"] for r in mine],
            [r["ECE"] for r in mine],
            yerr=[r["ECE_std"] for r in mine],
            fmt="o-",
            label=name,
        )
    ax.set_xlabel("corruption severity")
    ax.set_ylabel("ECE (%)")
    ax.legend()
    return rows, figure


def ownership(
    run_dirs: Sequence[Path], out: Path, threshold: float = 0.5, pdf: bool = False
) -> list[dict[str, Any]]:
    """Importance histogram and ownership embedding of each run with ``importances.safetensors``.

    Uses :class:`~torch_uncertainty_signorm.callbacks.MemberOwnershipCallback`'s figures
    (all layers and regularized layers); returns the ownership counts per run and scope.
    """
    from safetensors import safe_open

    from torch_uncertainty_signorm.callbacks.member_ownership import (
        importance_embedding_figure,
        importance_histogram_figure,
    )
    from torch_uncertainty_signorm.evaluation.diversity import ownership_fractions

    rows = []
    for run_dir in run_dirs:
        with safe_open(run_dir / "importances.safetensors", "pt") as file:
            regularized = json.loads(file.metadata()["regularized"])
            names = file.keys()  # a safe_open handle is not iterable
            layers = {name: file.get_tensor(name) for name in names}
        scopes = {
            "all": list(layers.values()),
            "regularized": [layers[n] for n in regularized if n in layers],
        }
        scopes = {scope: imps for scope, imps in scopes.items() if imps}
        num_members = next(iter(layers.values())).shape[0]
        name = f"{run_dir.parent.name}_{run_dir.name}"
        save_figure(
            importance_histogram_figure(scopes, threshold), out, f"importance_histogram_{name}", pdf
        )
        save_figure(
            importance_embedding_figure(scopes, num_members, threshold),
            out,
            f"importance_embedding_{name}",
            pdf,
        )
        for scope, imps in scopes.items():
            fractions = ownership_fractions(imps, threshold).tolist()
            rows.append(
                {"run": name, "scope": scope}
                | {f"k={k}": round(f, 4) for k, f in enumerate(fractions)}
            )
    return rows


def main(argv: Sequence[str] | None = None) -> dict[str, Path]:
    parser = argparse.ArgumentParser(
        prog="python -m studies.figures",
        description="Sweep tables (CSV) and figures (PNG/PDF) from results.csv files.",
    )
    parser.add_argument(
        "artefact", choices=["frontier", "diversity", "members", "lambda", "shift", "ownership"]
    )
    parser.add_argument("runs", nargs="+", help="folders searched for results.csv, or files")
    parser.add_argument("--out", default=".", help="output folder")
    parser.add_argument("--pdf", action="store_true", help="also save PDF figures")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        runs = find_runs(args.runs)
        if args.artefact == "ownership":
            dirs = [
                r.path.parent for r in runs if (r.path.parent / "importances.safetensors").is_file()
            ]
            if not dirs:
                raise ValueError("no run saved importances.safetensors.")
            write_rows(ownership(dirs, out, pdf=args.pdf), out / "ownership.csv")
            return {"csv": out / "ownership.csv"}
        if args.artefact == "diversity":
            table, points, figure = diversity_correlations(runs)
            write_rows(points, out / "diversity_points.csv")
        else:
            build = {
                "frontier": frontier,
                "members": member_scaling,
                "lambda": lambda_table,
                "shift": severity_curves,
            }[args.artefact]
            table, figure = build(runs)
    except ValueError as error:
        parser.error(str(error))
    name = {
        "frontier": "tau_frontier",
        "diversity": "diversity_correlations",
        "members": "member_scaling",
        "lambda": "lambda_robustness",
        "shift": "ece_vs_severity",
    }[args.artefact]
    write_rows(table, out / f"{name}.csv")
    save_figure(figure, out, name, args.pdf)
    print(f"wrote {out / name}.csv and {name}.png")
    return {"csv": out / f"{name}.csv", "png": out / f"{name}.png"}


if __name__ == "__main__":
    main()
