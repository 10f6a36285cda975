"""Evaluation beyond one OOD set and one severity: near/far OOD groups and severity sweeps, and
the printed test results.

The names below are imported on first use, so that the light :mod:`.eval_sets` (read by the
paper tooling) does not import torchmetrics and Lightning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

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
        OOD_GROUPS,
        OOD_METRICS,
        SEVERITIES,
        SHIFT_METRICS,
        EvalSet,
        ood_metric_name,
        shift_metric_name,
    )
    from .ood import NearFarOODMetrics
    from .printing import SigmaNormEvaluationLoop, results_tables, use_results_tables
    from .results_csv import append_to_last_row
    from .shift import SeverityShiftMetrics


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


__all__ = [
    "OOD_GROUPS",
    "OOD_METRICS",
    "SEVERITIES",
    "SHIFT_METRICS",
    "EvalSet",
    "NearFarOODMetrics",
    "SeverityShiftMetrics",
    "SigmaNormEvaluationLoop",
    "append_to_last_row",
    "ood_metric_name",
    "results_tables",
    "shift_metric_name",
    "use_results_tables",
]
