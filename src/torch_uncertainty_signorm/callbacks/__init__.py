"""Lightning callbacks for σNorm-Ensembles.

Each callback is imported on first use (PEP 562): ``from ...callbacks import
ExactResumeCheckpoint`` does not import the ownership figure's or the metrics' libraries
(TorchUncertainty's metrics bring scikit-learn and seaborn).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

#: Public name -> the submodule defining it.
_EXPORTS = {
    "DiversityTargetCallback": "diversity_target",
    "ExactResumeCheckpoint": "exact_resume",
    "IdenticalMembersWarning": "identical_members",
    "MemberOwnershipCallback": "member_ownership",
    "OODShiftEvaluation": "ood_shift",
    "ParameterCountCallback": "parameter_logging",
    "TestPredictionWriter": "prediction_writer",
}

if TYPE_CHECKING:
    from .diversity_target import DiversityTargetCallback
    from .exact_resume import ExactResumeCheckpoint
    from .identical_members import IdenticalMembersWarning
    from .member_ownership import MemberOwnershipCallback
    from .ood_shift import OODShiftEvaluation
    from .parameter_logging import ParameterCountCallback
    from .prediction_writer import TestPredictionWriter


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


__all__ = [
    "DiversityTargetCallback",
    "ExactResumeCheckpoint",
    "IdenticalMembersWarning",
    "MemberOwnershipCallback",
    "OODShiftEvaluation",
    "ParameterCountCallback",
    "TestPredictionWriter",
]
