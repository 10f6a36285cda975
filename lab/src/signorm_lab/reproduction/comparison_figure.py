"""The comparison drawn: ``comparison.png`` and ``comparison.svg`` beside ``comparison.txt``.

One panel per metric: σN-Ens − every other method, paired by seed, with its 95 % t interval (a
forest plot; one seed: points, no interval); one panel of cost, σN-Ens's multiple of each
method's parameters, fit and test time; and, where the runs wrote their test predictions
(:class:`~signorm_lab.callbacks.TestPredictionWriter`), each method's reliability diagram at the
first seed, drawn by TorchUncertainty's. Everything comes from the per-seed rows of
``comparison_runs.csv``, so a stored comparison is redrawn from that file alone::

    python -m signorm_lab.reproduction.comparison_figure --config experiments/compare/digits.yaml \\
        --out studies/results/compare_digits
"""

from __future__ import annotations

import argparse
import csv
import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..safety.atomic_files import replaced_atomically
from .comparison_report import METRICS, cost_multiples, runs_csv
from .paired import mean_interval

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from .comparison_file import Comparison
    from .comparison_report import MethodRuns

__all__ = [
    "FIGURE_FILES",
    "PREDICTIONS_FILENAME",
    "draw",
    "draw_comparison",
    "main",
    "save_figure",
]

#: What :class:`~signorm_lab.callbacks.TestPredictionWriter` writes into a run's folder.
PREDICTIONS_FILENAME = "test_predictions.safetensors"
#: The figure's files in a comparison's folder.
FIGURE_FILES = ("comparison.png", "comparison.svg")
_COST = (("params_total", "params"), ("fit_seconds", "fit time"), ("test_seconds", "test time"))
_BETTER, _WORSE, _OPEN = "#1b7837", "#b2182b", "#555555"


def draw(
    rows: Sequence[Mapping[str, str]],
    reference: str,
    labels: Mapping[str, str],
    predictions: Mapping[str, Path] | None = None,
) -> Figure:
    """The figure of a comparison from its per-seed rows (``comparison_runs.csv``'s columns),
    the reference method's name, each method's label, and each method's test-predictions file
    (a reliability diagram for each that exists; a note in the title where none does)."""
    from matplotlib.figure import Figure

    by_method: dict[str, dict[int, Mapping[str, str]]] = {}
    for row in rows:
        by_method.setdefault(row["method"], {})[int(row["seed"])] = row
    seeds = sorted(by_method[reference])
    others = [m for m in by_method if m != reference]
    metrics = [m for m in METRICS if all(row.get(m[0], "") != "" for row in rows)]
    files = {m: p for m, p in (predictions or {}).items() if p is not None and p.is_file()}
    reliability = [m for m in by_method if m in files]
    columns = max(len(metrics) + 1, len(reliability))
    figure = Figure(figsize=(3.0 * columns, 3.2 * (1 + bool(reliability)) + 0.6), dpi=72)
    grid = figure.add_gridspec(1 + bool(reliability), columns)
    ref_label = labels.get(reference, reference)
    names = [labels.get(m, m) for m in others]
    for i, (key, title, scale, _, higher) in enumerate(metrics):
        ax = figure.add_subplot(grid[0, i])
        for y, method in enumerate(others):
            diffs = [
                scale * (float(by_method[reference][s][key]) - float(by_method[method][s][key]))
                for s in seeds
            ]
            _interval(ax, y, mean_interval(diffs), higher)
        _forest_axes(ax, names, f"{title}\n{ref_label} − method ({'↑' if higher else '↓'} better)")
    cost = figure.add_subplot(grid[0, len(metrics)])
    _cost_panel(cost, by_method, reference, others, names, ref_label)
    for i, method in enumerate(reliability):
        title = f"{labels.get(method, method)}, seed {seeds[0]}"
        _reliability(figure.add_subplot(grid[1, i]), files[method], title)
    seed_text = (
        f"seed {seeds[0]}: one seed, points without interval"
        if len(seeds) < 2
        else f"seeds {', '.join(map(str, seeds))}: mean with its 95 % t interval"
    )
    missing = [labels.get(m, m) for m in by_method if m not in files]
    note = (
        ""
        if not missing
        else f"\nNo reliability diagram for {', '.join(missing)}: its run holds no test "
        f"predictions ({PREDICTIONS_FILENAME})"
    )
    stand_in = any(row.get("stand_in") == "True" for row in rows)
    warning = "STAND-IN DATA (random pixels): these runs say nothing about the methods\n"
    figure.suptitle(
        f"{warning if stand_in else ''}{ref_label} against each method, paired by seed "
        f"({seed_text}); filled where the interval excludes 0{note}",
        fontsize=10,
    )
    figure.tight_layout()
    return figure


def _interval(ax: Axes, y: int, stats: Mapping[str, float], higher: bool) -> None:
    """A point at the mean difference and a bar over its interval, coloured by what it shows."""
    mean, low, high = stats["mean"], stats["low"], stats["high"]
    shown = not math.isnan(low) and (low > 0 or high < 0)
    colour = (_BETTER if (mean > 0) == higher else _WORSE) if shown else _OPEN
    if not math.isnan(low):
        ax.plot([low, high], [y, y], color=colour, linewidth=2)
    ax.plot([mean], [y], "o", color=colour, markerfacecolor=colour if shown else "white")


def _forest_axes(ax: Axes, names: Sequence[str], title: str) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(names)), names if ax.get_subplotspec().is_first_col() else [])
    ax.set_ylim(len(names) - 0.5, -0.5)
    ax.set_title(title, fontsize=9)
    ax.tick_params(labelsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(4))
    ax.grid(axis="x", alpha=0.3)


def _cost_panel(
    ax: Axes,
    by_method: Mapping[str, Mapping[int, Mapping[str, str]]],
    reference: str,
    others: Sequence[str],
    names: Sequence[str],
    ref_label: str,
) -> None:
    """σN-Ens's multiple of each method's parameters, fit and test time (log scale, 1× marked)."""
    from matplotlib.ticker import FuncFormatter, NullLocator

    seeds = sorted(by_method[reference])
    records = {m: {s: _numbers(r) for s, r in runs.items()} for m, runs in by_method.items()}
    height = 0.8 / len(_COST)
    for j, (key, name) in enumerate(_COST):
        values = [cost_multiples(records[reference], records[m], seeds)[key] for m in others]
        ys = [y - 0.4 + height * (j + 0.5) for y in range(len(others))]
        bars = ax.barh(ys, values, height=height, label=name)
        ax.bar_label(bars, [f"{v:.2g}×" for v in values], fontsize=6, padding=1)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}×"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.margins(x=0.25)
    ax.set_yticks(range(len(others)), names)
    ax.set_ylim(len(others) - 0.5, -0.5)
    ax.set_title(f"cost: {ref_label}'s multiple\nof each method's", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncols=3)


def _numbers(row: Mapping[str, str]) -> dict[str, float]:
    return {key: float(row[key]) for key, _ in _COST}


def _reliability(ax: Axes, path: Path, label: str) -> None:
    """TorchUncertainty's reliability diagram of the members' mean probabilities in ``path``."""
    import torch
    from safetensors.torch import load_file
    from torch_uncertainty.metrics import CalibrationError

    # The subplot helper behind CalibrationError.plot(), which draws into a figure of its own.
    from torch_uncertainty.metrics.classification.calibration.calibration_error import (
        _reliability_diagram_subplot,
    )
    from torchmetrics.functional.classification.calibration_error import _binning_bucketize
    from torchmetrics.utilities.data import dim_zero_cat

    try:
        tensors = load_file(path)
        probs, targets = tensors["probs/0"].mean(dim=0), tensors["targets/0"]
    except Exception as error:  # safetensors' own error is no ValueError
        reason = " ".join(str(error).split())
        raise ValueError(
            f"{path}: not the test predictions a run writes ({reason}); remove it to draw the "
            "figure without this run's reliability diagram."
        ) from None
    # 15 bins: the ECE of TorchUncertainty's classification routine, the tables' ECE.
    metric = CalibrationError(task="multiclass", num_classes=probs.shape[-1], num_bins=15)
    metric.update(probs, targets)
    confidences, accuracies = dim_zero_cat(metric.confidences), dim_zero_cat(metric.accuracies)
    bounds = torch.linspace(0, 1, metric.n_bins + 1)
    acc_bin, conf_bin, prop_bin = _binning_bucketize(confidences, accuracies, bounds)
    _reliability_diagram_subplot(
        ax, acc_bin.numpy(), conf_bin.numpy(), prop_bin.numpy(), bounds.numpy(), title=label
    )
    ax.legend(fontsize=6, loc="upper left")
    ax.tick_params(labelsize=7)
    ax.title.set_fontsize(9)
    ax.xaxis.label.set_fontsize(8)
    ax.yaxis.label.set_fontsize(8)


def save_figure(figure: Figure, out: Path) -> str:
    """``comparison.png`` and ``comparison.svg`` in ``out``, each replaced whole; their names."""
    from matplotlib import rc_context

    png, svg = (out / name for name in FIGURE_FILES)
    with replaced_atomically(png) as partial:
        figure.savefig(partial, format="png", dpi=72)
    # No date and fixed ids: redrawing the same runs writes the same file.
    with rc_context({"svg.hashsalt": "signorm-compare"}), replaced_atomically(svg) as partial:
        figure.savefig(partial, format="svg", metadata={"Date": None})
    return f"{png}, {svg}"


def draw_comparison(
    comparison: Comparison, runs: Mapping[str, MethodRuns], seeds: Sequence[int], out: Path
) -> Figure:
    """The figure of ``runs`` (from the rows of ``comparison_runs.csv``, and each method's test
    predictions at the first seed).

    Raises:
        ValueError: Naming a predictions file that is not one, or what cannot be drawn.
    """
    rows = list(csv.DictReader(io.StringIO(runs_csv(runs, seeds, out))))
    labels = {name: r.label for name, r in runs.items()}
    predictions = {name: r.folders[seeds[0]] / PREDICTIONS_FILENAME for name, r in runs.items()}
    return draw(rows, comparison.reference, labels, predictions)


def main(argv: Sequence[str] | None = None) -> int:
    """Redraw a stored comparison from its ``comparison_runs.csv`` (and run folders, if any)."""
    from ..safety.files import read_regular
    from .comparison_file import read_comparison
    from .runs import MAX_RESULTS_BYTES

    parser = argparse.ArgumentParser(
        prog="python -m signorm_lab.reproduction.comparison_figure",
        description="Draw comparison.png and comparison.svg of the comparison stored under --out "
        "from its comparison_runs.csv; the reliability diagrams where its run folders hold "
        "test predictions.",
    )
    parser.add_argument("--config", required=True, help="the comparison file of these runs")
    parser.add_argument("--out", required=True, help="the folder holding comparison_runs.csv")
    args = parser.parse_args(argv)
    out = Path(args.out)
    try:
        comparison = read_comparison(args.config)
        text = read_regular(out / "comparison_runs.csv", "--out", MAX_RESULTS_BYTES)
    except (ValueError, OSError) as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    rows: list[dict[str, Any]] = list(csv.DictReader(io.StringIO(text.decode("utf-8"))))
    first = min(int(row["seed"]) for row in rows)
    predictions = {
        row["method"]: out / row["folder"] / PREDICTIONS_FILENAME
        for row in rows
        if int(row["seed"]) == first
    }
    labels = {name: spec["label"] for name, spec in comparison.methods.items()}
    try:
        figure = draw(rows, comparison.reference, labels, predictions)
    except ValueError as error:
        parser.exit(1, f"{parser.prog}: error: {error}\n")
    print(f"Written: {save_figure(figure, out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
