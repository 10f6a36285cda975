"""Lightning callbacks for σNorm-Ensembles."""

from .exact_resume import ExactResumeCheckpoint
from .member_ownership import MemberOwnershipCallback
from .ood_shift import OODShiftEvaluation
from .parameter_logging import ParameterCountCallback
from .prediction_writer import TestPredictionWriter

__all__ = [
    "ExactResumeCheckpoint",
    "MemberOwnershipCallback",
    "OODShiftEvaluation",
    "ParameterCountCallback",
    "TestPredictionWriter",
]
