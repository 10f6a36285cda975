"""Evaluation beyond one OOD set and one severity: near/far OOD groups and severity sweeps, and
the printed test results.

The names below are imported on first use, so that the light :mod:`.eval_sets` (read by the
paper tooling) does not import torchmetrics and Lightning.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: Public name -> the submodule defining it.
_EXPORTS = {
    **dict.fromkeys(["OOD_GROUPS", "OOD_METRICS", "SEVERITIES", "SHIFT_METRICS", "EvalSet",
                     "ood_metric_name", "shift_metric_name"], "eval_sets"),
    "NearFarOODMetrics": "ood",
    **dict.fromkeys(["SigmaNormEvaluationLoop", "results_tables", "use_results_tables"],
                    "printing"),
    "append_to_last_row": "results_csv",
    "SeverityShiftMetrics": "shift",
}

if TYPE_CHECKING:
    from .eval_sets import (
        OOD_GROUPS, OOD_METRICS, SEVERITIES, SHIFT_METRICS, EvalSet, ood_metric_name,
        shift_metric_name,
    )
    from .ood import NearFarOODMetrics
    from .printing import SigmaNormEvaluationLoop, results_tables, use_results_tables
    from .results_csv import append_to_last_row
    from .shift import SeverityShiftMetrics


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = sorted(_EXPORTS)
