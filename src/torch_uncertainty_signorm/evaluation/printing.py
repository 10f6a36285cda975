"""Print the near/far OOD and per-severity shift results as tables at the end of a test.

TorchUncertainty's ``TUTrainer`` prints test results with ``TUEvaluationLoop``, which files every
key starting with ``ood`` or ``shift`` by its last segment (``ood_near/SVHN/AUROC`` and
``ood_far/AUROC`` would overwrite each other) and expects a ``shift/severity`` key for a single
evaluated severity (a ``KeyError`` otherwise). :class:`OODShiftEvaluationLoop` prints those keys
in their own tables and hands every other key to TorchUncertainty's printing. Units follow
TorchUncertainty's printed tables: AUROC, AUPR, FPR95, Acc and ECE in percent (the logged values
and ``results.csv`` stay fractions, as TorchUncertainty logs them), NLL in nats; each header
names its unit.
"""

from __future__ import annotations

import re

from lightning.pytorch.trainer.connectors.logger_connector.result import _OUT_DICT
from rich import get_console
from rich.table import Table
from torch_uncertainty.utils.evaluation_loop import TUEvaluationLoop

from .eval_sets import OOD_GROUPS, OOD_METRICS, SHIFT_METRICS

__all__ = ["OODShiftEvaluationLoop", "ood_shift_tables"]

_OOD_KEY = re.compile(r"^ood_(near|far)/(?:(.+)/)?(AUROC|AUPR|FPR95)$")
_SHIFT_KEY = re.compile(r"^shift/(s[1-5]|mean)/(Acc|NLL|ECE)$")
#: Printed unit of each metric: percent (x100), as TorchUncertainty prints them, or nats.
_PERCENT = {"AUROC", "AUPR", "FPR95", "Acc", "ECE"}


def _header(metric: str) -> str:
    return f"{metric} (%)" if metric in _PERCENT else f"{metric} (nats)"


def _cell(values: dict[str, float], metric: str) -> str:
    if metric not in values:
        return ""
    return f"{100 * values[metric]:.3f}" if metric in _PERCENT else f"{values[metric]:.5f}"


def _is_ours(key: str) -> bool:
    return bool(_OOD_KEY.match(key) or _SHIFT_KEY.match(key))


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


class OODShiftEvaluationLoop(TUEvaluationLoop):
    """TorchUncertainty's test loop, printing the near/far OOD and severity keys in own tables."""

    @staticmethod
    def _print_results(results: list[_OUT_DICT], stage: str) -> None:
        ours: dict[str, float] = {}
        rest = []
        for result in results:
            ours |= {k: v for k, v in result.items() if _is_ours(k)}
            rest.append({k: v for k, v in result.items() if not _is_ours(k)})
        TUEvaluationLoop._print_results(rest, stage)
        for table in ood_shift_tables(ours):
            get_console().print(table)
