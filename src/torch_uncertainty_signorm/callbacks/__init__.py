"""Lightning callbacks for σNorm-Ensembles.

Each callback is imported on first use (PEP 562): ``from ...callbacks import
ExactResumeCheckpoint`` does not import the ownership figure's or the metrics' libraries
(TorchUncertainty's metrics bring scikit-learn and seaborn).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: Public name -> the submodule defining it.
_EXPORTS = {
    "ExactResumeCheckpoint": "exact_resume",
    "MemberOwnershipCallback": "member_ownership",
    "OODShiftEvaluation": "ood_shift",
    "ParameterCountCallback": "parameter_logging",
    "TestPredictionWriter": "prediction_writer",
}

if TYPE_CHECKING:
    from .exact_resume import ExactResumeCheckpoint
    from .member_ownership import MemberOwnershipCallback
    from .ood_shift import OODShiftEvaluation
    from .parameter_logging import ParameterCountCallback
    from .prediction_writer import TestPredictionWriter


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value  # later lookups skip this hook
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = sorted(_EXPORTS)
