"""The printed test results: TorchUncertainty's tables, full names, diversity, near/far OOD, shift.

TorchUncertainty's ``TUTrainer`` prints test results with ``TUEvaluationLoop``: one table per
category (``test/cls``, ``test/cal``, ``ood``, ``test/sc``, ``test/cplx`` ...), metric names cut
to 12 characters (``ens_Disagre…``), the in-distribution ensemble measures (``test/ens_*``) and
σN-Ens's diversity measures (``test/div/*``) left out, ``flops`` for the whole first test batch,
and every key starting with ``ood`` or ``shift`` filed by its last segment (``ood_near/SVHN/AUROC``
and ``ood_far/AUROC`` would overwrite each other, and one ``shift/severity`` key is expected).
:class:`SigmaNormEvaluationLoop` prints the same categories and units with whole names, an
*Ensemble diversity* table (σNorm-cos over all layers and over the regularized ones, Jensen gap,
geometric ambiguity, the mutual information U_mod, disagreement), the FLOPs per input beside
those of the first batch, the near/far OOD and per-severity shift keys in tables of their own,
and each member's accuracy and NLL (``test/member_{m}/*``) beside the member health counts
(``test/health/*``). Units follow TorchUncertainty's tables: AUROC, AUPR, FPR95, Acc, ECE ... in
percent (the logged values and ``results.csv`` stay fractions, as TorchUncertainty logs them), NLL
in nats.
"""

from __future__ import annotations

import math
import re
from typing import Any

from lightning.pytorch import Trainer
from rich import get_console
from rich.console import Group
from rich.table import Table
from torch_uncertainty.utils.evaluation_loop import (
    INT_METRICS,
    PERCENTAGE_METRICS,
    TUEvaluationLoop,
)

from .eval_sets import OOD_GROUPS, OOD_METRICS, SHIFT_METRICS

__all__ = [
    "SigmaNormEvaluationLoop",
    "member_tables",
    "ood_shift_tables",
    "results_tables",
    "use_results_tables",
]

_OOD_KEY = re.compile(r"^ood_(near|far)/(?:(.+)/)?(AUROC|AUPR|FPR95)$")
_SHIFT_KEY = re.compile(r"^shift/(s[1-5]|mean)/(Acc|NLL|ECE)$")
_MEMBER_KEY = re.compile(r"^test/member_(\d+)/(Acc|NLL)$")
#: Printed unit of each metric of the near/far OOD and shift tables: percent (x100), or nats.
_PERCENT = {"AUROC", "AUPR", "FPR95", "Acc", "ECE"}
#: TorchUncertainty's categories: key prefix -> table title, in its order.
_CATEGORIES = {
    "test/cls/": "Classification",
    "test/seg/": "Segmentation",
    "test/reg/": "Regression",
    "test/cal/": "Calibration",
    "ood/": "OOD Detection",
    "test/sc/": "Selective Classification",
    "test/post/": "Post-Processing",
    "shift/": "Distribution Shift",
}
#: The ensemble's diversity measures: key -> printed name (other ``test/div/*`` keys print as
#: their last segment). ``test/ens_*`` are TorchUncertainty's, ``test/div/*`` σN-Ens's.
DIVERSITY_NAMES = {
    "test/div/signorm_cos": "σNorm-cos (all layers)",
    "test/div/signorm_cos_regularized": "σNorm-cos (regularized layers)",
    "test/div/jensen_gap": "Jensen gap",
    "test/div/geometric_ambiguity": "Geometric ambiguity",
    "test/ens_MI": "Mutual information U_mod (nats), test set",
    "test/ens_Disagreement": "Disagreement, test set",
    "test/ens_Entropy": "Mean member entropy (nats), test set",
}
#: TorchUncertainty's ensemble measures in the OOD table (``ood/ens_*``) are computed on the OOD
#: set only: their printed names say so (``ens_MI`` is the U_mod of the diversity table, there
#: on the test set).
OOD_ENSEMBLE_NAMES = {
    "ens_MI": "ens_MI = U_mod (nats), OOD set",
    "ens_Disagreement": "ens_Disagreement, OOD set",
    "ens_Entropy": "ens_Entropy (nats), OOD set",
}


def _value(name: str, value: float) -> str:
    """TorchUncertainty's formats: percent, human-readable counts, else 5 decimals; NaN says
    what it means (``Cov_5Risk``: no coverage keeps the risk at or below 5%)."""
    if math.isnan(value):
        return "none (no coverage has risk <= 5%)" if name.endswith("Cov_5Risk") else "NaN"
    if name in PERCENTAGE_METRICS:
        return f"{value:.3%}"
    if name in INT_METRICS or name.startswith("FLOPs"):
        for scale, suffix in ((1e9, " G"), (1e6, " M"), (1e3, " K")):
            if abs(value) >= scale:
                return f"{value / scale:.2f}{suffix}"
        return f"{int(value)}"
    return f"{value:.5f}"


def _table(first_column: str, title: str, rows: list[tuple[str, str]]) -> Table:
    """A two-column table whose first column fits its longest name (no ellipsis)."""
    table = Table()
    width = max(len(first_column), *(len(name) for name, _ in rows))
    table.add_column(first_column, justify="center", style="cyan", min_width=width, no_wrap=True)
    table.add_column(title, justify="center", style="magenta", min_width=25)
    for name, value in rows:
        table.add_row(name, value)
    return table


def _is_ours(key: str) -> bool:
    return bool(_OOD_KEY.match(key) or _SHIFT_KEY.match(key))


def results_tables(
    results: dict[str, Any], stage: str = "test", first_batch_inputs: int | None = None
) -> list[Table]:
    """Rich tables of one evaluation's ``results`` (logged key -> value).

    TorchUncertainty's categories with whole metric names, then *Ensemble diversity* (the
    :data:`DIVERSITY_NAMES` keys and any other ``test/div/*``), *Complexity* (with
    ``first_batch_inputs``, the FLOPs per input of the first test batch as well), and the
    near/far OOD and shift tables of :func:`ood_shift_tables`, then :func:`member_tables`.
    """
    values = {key.split("/dataloader_idx_")[0]: float(value) for key, value in results.items()}
    first_column = f"{stage.capitalize()} metric"
    tables = []
    for prefix, category in _CATEGORIES.items():
        chosen = {
            key.removeprefix(prefix): value
            for key, value in values.items()
            if key.startswith(prefix) and not _is_ours(key)
        }
        title = category
        if prefix == "shift/" and "severity" in chosen:
            title = f"{category} lvl{int(chosen.pop('severity'))}"
        if chosen:
            tables.append(
                _table(
                    first_column,
                    title,
                    [
                        (
                            OOD_ENSEMBLE_NAMES.get(name, name) if prefix == "ood/" else name,
                            _value(name.rpartition("/")[2], value),
                        )
                        for name, value in sorted(chosen.items())
                    ],
                )
            )
    diversity = [
        (DIVERSITY_NAMES[key], _value("", values[key])) for key in DIVERSITY_NAMES if key in values
    ]
    diversity += [
        (key.removeprefix("test/div/"), _value("", value))
        for key, value in sorted(values.items())
        if key.startswith("test/div/") and key not in DIVERSITY_NAMES
    ]
    if diversity:
        tables.append(_table(first_column, "Ensemble diversity", diversity))
    complexity = []
    if "test/cplx/flops" in values:
        flops = values["test/cplx/flops"]
        if first_batch_inputs:
            complexity += [
                (f"FLOPs (first test batch, {first_batch_inputs} inputs)", _value("flops", flops)),
                ("FLOPs per input", _value("flops", flops / first_batch_inputs)),
            ]
        else:
            complexity.append(("FLOPs (first test batch)", _value("flops", flops)))
    complexity += [
        (key.removeprefix("test/cplx/"), _value(key.rpartition("/")[2], value))
        for key, value in sorted(values.items())
        if key.startswith("test/cplx/") and key != "test/cplx/flops"
    ]
    if complexity:
        tables.append(_table(first_column, "Complexity", complexity))
    return tables + ood_shift_tables(values) + member_tables(values, first_column)


def member_tables(results: dict[str, float], first_column: str = "Test metric") -> list[Table]:
    """*Members*: each member's Acc (%) and NLL (``test/member_{m}/*``); *Member health*: the
    ``test/health/*`` counts."""
    tables = []
    members: dict[int, dict[str, float]] = {}
    for key, value in results.items():
        if match := _MEMBER_KEY.match(key):
            members.setdefault(int(match.group(1)), {})[match.group(2)] = float(value)
    if members:
        table = Table(title="Members")
        for column in ("Member", *map(_header, ("Acc", "NLL"))):
            table.add_column(column, justify="center")
        for member in sorted(members):
            table.add_row(str(member), *(_cell(members[member], m) for m in ("Acc", "NLL")))
        tables.append(table)
    health = [
        (key.removeprefix("test/health/"), f"{int(value)}")
        for key, value in sorted(results.items())
        if key.startswith("test/health/")
    ]
    if health:
        tables.append(_table(first_column, "Member health", health))
    return tables


def ood_shift_tables(results: dict[str, float]) -> list[Table]:
    """Rich tables of the ``ood_{near,far}/...`` and ``shift/s{k}/...`` values in ``results``."""
    tables = []
    ood = [(_OOD_KEY.match(k), v) for k, v in results.items() if _OOD_KEY.match(k)]
    if ood:
        table = Table(title="Near / far OOD detection")
        for column in ("Group", "Set", *map(_header, OOD_METRICS)):
            table.add_column(column, justify="center")
        rows: dict[tuple[str, str], dict[str, float]] = {}
        for match, value in ood:
            group, name, metric = match.groups()
            rows.setdefault((group, name or "mean"), {})[metric] = float(value)
        order = {group: i for i, group in enumerate(OOD_GROUPS)}
        for (group, name), values in sorted(
            rows.items(), key=lambda r: (order[r[0][0]], r[0][1] == "mean")
        ):
            cells = [_cell(values, m) for m in OOD_METRICS]
            table.add_row(group, name, *cells)
        tables.append(table)
    shift = [(_SHIFT_KEY.match(k), v) for k, v in results.items() if _SHIFT_KEY.match(k)]
    if shift:
        table = Table(title="Corruption shift (mean over corruptions)")
        for column in ("Severity", *map(_header, SHIFT_METRICS)):
            table.add_column(column, justify="center")
        rows = {}
        for match, value in shift:
            level, metric = match.groups()
            rows.setdefault(level, {})[metric] = float(value)
        for level in sorted(rows, key=lambda lvl: (lvl == "mean", lvl)):
            cells = [_cell(rows[level], m) for m in SHIFT_METRICS]
            table.add_row(level, *cells)
        tables.append(table)
    return tables


def _header(metric: str) -> str:
    return f"{metric} (%)" if metric in _PERCENT else f"{metric} (nats)"


def _cell(values: dict[str, float], metric: str) -> str:
    if metric not in values:
        return ""
    return f"{100 * values[metric]:.3f}" if metric in _PERCENT else f"{values[metric]:.5f}"


def _first_batch_inputs(trainer: Trainer | None) -> int | None:
    """Inputs in the first test batch (the one TorchUncertainty counts FLOPs on)."""
    loaders = getattr(trainer, "test_dataloaders", None) if trainer is not None else None
    loader = loaders[0] if isinstance(loaders, (list, tuple)) and loaders else loaders
    batch_size = getattr(loader, "batch_size", None)
    try:
        size = len(loader.dataset)
    except (AttributeError, TypeError):
        return batch_size
    return min(batch_size, size) if batch_size else None


class SigmaNormEvaluationLoop(TUEvaluationLoop):
    """TorchUncertainty's test loop, printing :func:`results_tables` instead of its tables."""

    def _print_results(self, results: list[dict[str, Any]], stage: str) -> None:
        merged: dict[str, Any] = {}
        for result in results:
            merged |= result
        inputs = _first_batch_inputs(self.trainer) if stage == "test" else None
        tables = results_tables(merged, stage, inputs)
        if tables:
            get_console().print(Group(*tables))


def use_results_tables(trainer: Trainer) -> None:
    """Print ``trainer``'s test results with :class:`SigmaNormEvaluationLoop`, when it is
    TorchUncertainty's ``TUTrainer`` (a plain Lightning trainer keeps its own printing).

    The loop object stays (its data source and progress are attached); the subclass adds no
    state and changes only the printing.
    """
    if type(trainer.test_loop) is TUEvaluationLoop:
        trainer.test_loop.__class__ = SigmaNormEvaluationLoop
