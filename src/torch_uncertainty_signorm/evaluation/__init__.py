"""Evaluation beyond one OOD set and one severity: near/far OOD groups and severity sweeps."""

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
from .printing import OODShiftEvaluationLoop
from .results_csv import append_to_last_row
from .shift import SeverityShiftMetrics

__all__ = [
    "OOD_GROUPS",
    "OOD_METRICS",
    "SEVERITIES",
    "SHIFT_METRICS",
    "EvalSet",
    "NearFarOODMetrics",
    "OODShiftEvaluationLoop",
    "SeverityShiftMetrics",
    "append_to_last_row",
    "ood_metric_name",
    "shift_metric_name",
]
