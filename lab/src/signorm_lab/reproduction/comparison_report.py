"""What ``signorm-compare`` prints and writes of its finished runs: the tables and the runs' CSV.

Per method: each metric (mean over seeds); its paired difference σN-Ens − method with a t
interval over seeds (the seed is the unit) and what it shows, in capitals only where the
interval excludes 0 (one seed: which way it went on that seed); the cost as σN-Ens's multiple
of each method's parameters, fit and test time (median over seeds); and whether each run
learned: accuracy above the majority class and NLL below the class frequencies' NLL, for the
ensemble and for every member it reports, by :data:`LEARNED_MARGINS`. When σN-Ens's members
are still one model at every seed (:data:`ONE_MODEL_COS`), the tables say so, and where the
comparison file's ``see`` says a difference was found.

Imports neither torch nor Lightning: the first line of a comparison is printed within a second.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .paired import mean_interval
from .tables import format_table

if TYPE_CHECKING:
    from .comparison_file import Comparison

__all__ = [
    "LEARNED_MARGINS",
    "MEMBER_ACC",
    "METRICS",
    "ONE_MODEL_COS",
    "SIGNORM_COS",
    "MethodRuns",
    "class_frequency_baseline",
    "cost_multiples",
    "learned",
    "plan",
    "runs_csv",
    "tables",
]

#: (results.csv key, column title, scale, digits, higher is better).
METRICS = (
    ("test/cls/Acc", "Acc (%)", 100, 1, True),
    ("test/cls/NLL", "NLL", 1, 3, False),
    ("test/cal/ECE", "ECE (%)", 100, 2, False),
    ("test/cls/Brier", "Brier", 1, 3, False),
    ("ood/AUROC", "OOD AUROC (%)", 100, 1, True),
)
#: A run has learned when its accuracy is this many points above the majority class's and its
#: NLL this many nats below the class frequencies' (for the ensemble and each member): closer
#: than that, its metrics describe an untrained model and say nothing about the method.
LEARNED_MARGINS = {"accuracy_points": 5.0, "nll_nats": 0.05}
#: The members' diversity that the summary prints (results.csv key).
SIGNORM_COS = "test/div/signorm_cos"
#: σNorm-cos (all layers) at or above which σN-Ens's members count as one model: halfway between
#: the highest of a stored run whose members passed the registered fine-tune comparison's
#: members-apart check (0.948, digits) and the lowest of the second main job's 120-step runs,
#: whose members stayed one model (0.993, seeds 0-4).
ONE_MODEL_COS = 0.97
MEMBER_ACC = re.compile(r"test/member_(\d+)/Acc")


@dataclass
class MethodRuns:
    """One method's finished runs: per seed, its metrics and run record."""

    label: str
    metrics: dict[int, dict[str, float]] = field(default_factory=dict)
    records: dict[int, dict[str, Any]] = field(default_factory=dict)
    folders: dict[int, Path] = field(default_factory=dict)
    stand_in: bool = False


def plan(comparison: Comparison, methods: Sequence[str], seeds: Sequence[int], out: Path) -> str:
    """The comparison's first line: what runs, how many, from which recipes, into which folder."""
    recipes = [Path(comparison.methods[m]["recipe"]).name for m in methods]
    labels = ", ".join(comparison.methods[m]["label"] for m in methods)
    return (
        f"signorm-compare: {len(methods)} methods ({labels}) × {len(seeds)} "
        f"seed{'s' if len(seeds) > 1 else ''} = {len(methods) * len(seeds)} runs of "
        f"{', '.join(recipes)}, one after another under {out} (finished runs are reused; each "
        "run prints its own progress)"
    )


def class_frequency_baseline(record: Mapping[str, Any]) -> tuple[float, float]:
    """Accuracy of always predicting the training batches' majority class, and the NLL of
    predicting their class frequencies, on the in-distribution test set of ``record``."""
    train = {int(k): v for k, v in record["train_class_counts"].items()}
    test = {int(k): v for k, v in record["test_class_counts"].items()}
    n_train, n_test = sum(train.values()), sum(test.values())
    if not n_train or not n_test:
        return math.nan, math.nan
    majority = max(train, key=lambda k: (train[k], -k))
    # A test class the training batches never showed gets half a count (no infinite NLL).
    nll = -sum(c * math.log(max(train.get(k, 0), 0.5) / n_train) for k, c in test.items())
    return test.get(majority, 0) / n_test, nll / n_test


def learned(metrics: Mapping[str, float], record: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether a run (and each member it reports) learned, by :data:`LEARNED_MARGINS`, and
    the margins as text."""
    majority, prior_nll = class_frequency_baseline(record)
    accuracy, nll = metrics.get("test/cls/Acc", math.nan), metrics.get("test/cls/NLL", math.nan)
    members = [v for k, v in metrics.items() if MEMBER_ACC.fullmatch(k)]
    worst = min(members) if members else math.nan
    above = 100 * (accuracy - majority)
    below = prior_nll - nll
    ok = above >= LEARNED_MARGINS["accuracy_points"] and below >= LEARNED_MARGINS["nll_nats"]
    text = f"acc {above:+.1f} points, NLL {-below:+.3f}"
    if members:
        worst_above = 100 * (worst - majority)
        ok = ok and worst_above >= LEARNED_MARGINS["accuracy_points"]
        text += f", worst member's acc {worst_above:+.1f} points"
    return bool(ok), text


def _present(runs: Mapping[str, MethodRuns]) -> list[tuple[str, str, int, int, bool]]:
    """The metrics every run of every method holds (OOD only where all runs have it)."""
    return [
        m for m in METRICS if all(m[0] in row for r in runs.values() for row in r.metrics.values())
    ]


def _cell(value: float, scale: float, digits: int, sign: bool = False) -> str:
    if math.isnan(value):
        return "-"
    return f"{value * scale:{'+' if sign else ''}.{digits}f}"


def _verdict(stats: Mapping[str, float], higher_better: bool, reference: str = "σN-Ens") -> str:
    """What a paired difference shows: capitals only where its interval excludes 0; with one
    seed, which way it went on that seed (no interval, so neither better nor worse)."""
    mean, low, high = stats["mean"], stats["low"], stats["high"]
    if stats["n"] < 2:
        if mean == 0:
            return "equal on this seed"
        return f"{reference} {'higher' if mean > 0 else 'lower'} on this seed"
    if low > 0 or high < 0:
        better = (low > 0) == higher_better
        return f"{reference} BETTER" if better else f"{reference} WORSE"
    return "no difference shown"


def _one_model_note(comparison: Comparison, ref: MethodRuns, seeds: Sequence[int]) -> list[str]:
    """Two lines when the reference's members are one model at every seed (σNorm-cos at or
    above :data:`ONE_MODEL_COS`): what the comparison then shows, why, and where to look."""
    values = [ref.metrics[s].get(SIGNORM_COS) for s in seeds]
    if any(v is None or v < ONE_MODEL_COS for v in values):
        return []
    where = (
        f" Where they did, the comparison found a difference: {comparison.see}."
        if comparison.see
        else " A longer budget separates them."
    )
    low, high = min(values), max(values)
    span = f"{low:.3f}" if f"{low:.3f}" == f"{high:.3f}" else f"{low:.3f}-{high:.3f}"
    state = (
        f"{ref.label}'s members are still one model at every seed (σNorm-cos {span}, >= "
        f"{ONE_MODEL_COS}): here {ref.label} is close to a single model, not an ensemble."
    )
    return [state, f"Why: the budget is too short for its members to separate.{where}"]


def tables(comparison: Comparison, runs: Mapping[str, MethodRuns], seeds: Sequence[int]) -> str:
    """The comparison's tables as aligned text (see the module docstring)."""
    metrics = _present(runs)
    ref = runs[comparison.reference]
    lines = []
    stand_in = [r.label for r in runs.values() if r.stand_in]
    if stand_in:
        lines.append(
            f"STAND-IN DATA (random pixels) in the runs of {', '.join(stand_in)}: these "
            "rows test the tooling and say nothing about the methods.\n"
        )
    body = []
    for r in runs.values():
        cells = []
        for key, _, scale, digits, _ in metrics:
            stats = mean_interval([r.metrics[s][key] for s in seeds])
            spread = "" if stats["n"] < 2 else f" ± {_cell(_sd(r, key, seeds), scale, digits)}"
            cells.append(_cell(stats["mean"], scale, digits) + spread)
        body.append([r.label, *cells])
    lines.append(f"Test metrics, mean ± sd over seeds {list(seeds)}:")
    lines.append(format_table(["Method", *(m[1] for m in metrics)], body))
    lines.extend(_member_diversity(runs, seeds))
    lines.extend(_one_model_note(comparison, ref, seeds))
    body = []
    for name, r in runs.items():
        if name == comparison.reference:
            continue
        for key, title, scale, digits, higher in metrics:
            stats = mean_interval([ref.metrics[s][key] - r.metrics[s][key] for s in seeds])
            interval = (
                "(1 seed)"
                if stats["n"] < 2
                else f"[{_cell(stats['low'], scale, digits, True)}, "
                f"{_cell(stats['high'], scale, digits, True)}]"
            )
            body.append(
                [
                    r.label,
                    title,
                    _cell(stats["mean"], scale, digits, True),
                    interval,
                    _verdict(stats, higher, ref.label),
                ]
            )
    caption = (
        "on one seed, no interval: which way each metric went, not whether it holds"
        if len(seeds) < 2
        else "with its 95 % t interval over seeds, in capitals where it excludes 0 "
        "('no difference shown' is not 'level')"
    )
    lines.append(f"\nPaired by seed, {ref.label} − method, {caption}:")
    lines.append(
        format_table(
            ["Method", "Metric", f"{ref.label} − method", "Interval", "Shows"], body, align="llrrl"
        )
    )
    lines.append(
        f"\nCost, and {ref.label}'s as a multiple of each method's (medians over seeds; times "
        "measured in this comparison):"
    )
    lines.append(format_table(*_cost(comparison, runs, seeds)))
    body, failed = [], []
    for r in runs.values():
        for s in seeds:
            ok, text = learned(r.metrics[s], r.records[s])
            majority, prior = class_frequency_baseline(r.records[s])
            tested = r.records[s].get("tested_step")
            body.append(
                [
                    r.label,
                    str(s),
                    "yes" if ok else "NO",
                    text,
                    f"{100 * majority:.1f}",
                    f"{prior:.3f}",
                    "-" if tested is None else f"{tested} of {r.records[s]['optimizer_steps']}",
                ]
            )
            if not ok:
                failed.append(f"{r.label} seed {s}")
    lines.append(
        f"\nDid every run learn? (accuracy >= {LEARNED_MARGINS['accuracy_points']:g} "
        f"points above the majority class and NLL >= {LEARNED_MARGINS['nll_nats']:g} "
        "nats below the class frequencies', ensemble and every member):"
    )
    lines.append(
        format_table(
            [
                "Method",
                "Seed",
                "Learned",
                "Run − class frequencies",
                "Majority acc (%)",
                "Prior NLL",
                "Tested step",
            ],
            body,
            align="lrllrrr",
        )
    )
    if failed:
        lines.append(
            f"NOT LEARNED: {', '.join(failed)}. Their metrics describe an untrained "
            "model; raise the budget before reading the tables above."
        )
    return "\n".join(lines) + "\n"


def cost_multiples(
    reference: Mapping[int, Mapping[str, float]],
    other: Mapping[int, Mapping[str, float]],
    seeds: Sequence[int],
) -> dict[str, float]:
    """The reference's parameters, fit and test time as multiples of ``other``'s, from each
    method's run records by seed: median over seeds (NaN where ``other`` took no time)."""
    return {
        key: _median([reference[s][key] / other[s][key] for s in seeds if other[s][key]])
        for key in ("params_total", "fit_seconds", "test_seconds")
    }


def _cost(
    comparison: Comparison, runs: Mapping[str, MethodRuns], seeds: Sequence[int]
) -> tuple[list[str], list[list[str]]]:
    ref = runs[comparison.reference]
    body = []
    for name, r in runs.items():
        record = r.records[seeds[0]]
        multiple = cost_multiples(ref.records, r.records, seeds)
        seconds = [
            _median([r.records[s][k] for s in seeds]) for k in ("fit_seconds", "test_seconds")
        ]
        body.append(
            [
                r.label,
                f"{record['params_total'] / 1e6:.3f}",
                f"{record['params_trainable'] / 1e6:.3f}",
                f"{record['optimizer_steps']}",
                *(f"{s:.1f}" for s in seconds),
                *(
                    "-" if name == comparison.reference or math.isnan(v) else f"{v:.2f}×"
                    for v in multiple.values()
                ),
            ]
        )
    label = ref.label
    header = [
        "Method",
        "Params (M)",
        "Trained (M)",
        "Steps",
        "Fit (s)",
        "Test (s)",
        f"{label} params",
        f"{label} fit time",
        f"{label} test time",
    ]
    return header, body


def _member_diversity(runs: Mapping[str, MethodRuns], seeds: Sequence[int]) -> list[str]:
    """A line per method whose runs report σNorm-cos: the members' mean pairwise cosine of
    feature importances, per seed (1: the members are one model)."""
    lines = []
    for r in runs.values():
        values = [r.metrics[s].get(SIGNORM_COS) for s in seeds]
        if any(v is None for v in values):
            continue
        per_seed = ", ".join(f"{v:.3f}" for v in values)
        lines.append(
            f"{r.label}'s members, σNorm-cos (1 = one model; lower = further apart), per seed: "
            f"{per_seed}"
        )
    return lines


def _sd(r: MethodRuns, key: str, seeds: Sequence[int]) -> float:
    values = [r.metrics[s][key] for s in seeds]
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def runs_csv(runs: Mapping[str, MethodRuns], seeds: Sequence[int], out: Path) -> str:
    """One row per run: method, seed, folder (relative to ``out``), metrics, cost and the
    learned check."""
    keys = [m[0] for m in METRICS]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(
        [
            "method",
            "seed",
            "folder",
            *keys,
            "params_total",
            "params_trainable",
            "optimizer_steps",
            "fit_seconds",
            "test_seconds",
            "learned",
            "stand_in",
        ]
    )
    for name, r in runs.items():
        for s in seeds:
            record = r.records[s]
            folder = r.folders[s]
            folder = folder.relative_to(out) if folder.is_relative_to(out) else folder
            writer.writerow(
                [
                    name,
                    s,
                    folder,
                    *(r.metrics[s].get(k, "") for k in keys),
                    record["params_total"],
                    record["params_trainable"],
                    record["optimizer_steps"],
                    record["fit_seconds"],
                    record["test_seconds"],
                    learned(r.metrics[s], record)[0],
                    r.stand_in,
                ]
            )
    return buffer.getvalue()
