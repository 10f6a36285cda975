"""Evaluation beyond one OOD set and one severity: near/far OOD groups and severity sweeps, and
the printed test results."""

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
