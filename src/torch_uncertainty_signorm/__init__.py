"""σNorm-Ensembles for TorchUncertainty: implicit ensembles with temperature-controlled diversity.

The names below are imported on first use (PEP 562), so that importing a submodule, such as the
``torch-uncertainty`` command answering ``--help`` or :mod:`.reproduction.regression` in a CI job,
does not import torch, timm and transformers first.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if sys.argv[:1] == ["-m"] and sys.path and sys.path[0] in ("", os.getcwd()):
    # `python -m torch_uncertainty_signorm.<command>` put the working directory first on the
    # import path: a module lying beside a downloaded recipe would be imported as a library.
    del sys.path[0]

from ._lazy import lazy_exports

#: Public name -> the submodule defining it.
_EXPORTS = {
    "convert_norm_layers": "signorm.conversion", "find_norm_layers": "signorm.conversion",
    **dict.fromkeys(["geometric_ambiguity", "jensen_gap", "member_ownership", "mutual_information",
                     "ownership_counts", "pairwise_cosine", "signorm_cosine"], "diversity"),
    "SigmaNormConfig": "signorm.config",
    "SigmaNormEnsemble": "signorm.ensemble", "signorm_ensemble": "signorm.ensemble",
    "REGULARIZED_LAYER_PRESETS": "signorm.layer_selection",
    "select_layers": "signorm.layer_selection",
    "MemberHeads": "members.heads",
    **dict.fromkeys(["SigmaBatchNorm1d", "SigmaBatchNorm2d", "SigmaBatchNorm3d",
                     "SigmaGroupNorm", "SigmaLayerNorm", "SigmaLayerNorm2d", "SigmaRMSNorm",
                     "SigmaSyncBatchNorm"], "signorm.layers"),
    "MemberWrapper": "members.wrapper",
    "parameter_counts": "evaluation.parameter_counts",
    "EnsemblePrediction": "prediction", "ensemble_prediction": "prediction",
    "predict": "prediction",
    "ImportanceSharingPenalty": "signorm.regularization",
    "sharing_penalty": "signorm.regularization",
}

if TYPE_CHECKING:
    from .diversity import (
        geometric_ambiguity,
        jensen_gap,
        member_ownership,
        mutual_information,
        ownership_counts,
        pairwise_cosine,
        signorm_cosine,
    )
    from .evaluation.parameter_counts import parameter_counts
    from .members.heads import MemberHeads
    from .members.wrapper import MemberWrapper
    from .prediction import EnsemblePrediction, ensemble_prediction, predict
    from .signorm.config import SigmaNormConfig
    from .signorm.conversion import convert_norm_layers, find_norm_layers
    from .signorm.ensemble import SigmaNormEnsemble, signorm_ensemble
    from .signorm.layer_selection import REGULARIZED_LAYER_PRESETS, select_layers
    from .signorm.layers import (
        SigmaBatchNorm1d,
        SigmaBatchNorm2d,
        SigmaBatchNorm3d,
        SigmaGroupNorm,
        SigmaLayerNorm,
        SigmaLayerNorm2d,
        SigmaRMSNorm,
        SigmaSyncBatchNorm,
    )
    from .signorm.regularization import ImportanceSharingPenalty, sharing_penalty


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


__version__ = "0.1.0"

__all__ = [
    "REGULARIZED_LAYER_PRESETS",
    "EnsemblePrediction",
    "ImportanceSharingPenalty",
    "MemberHeads",
    "MemberWrapper",
    "SigmaBatchNorm1d",
    "SigmaBatchNorm2d",
    "SigmaBatchNorm3d",
    "SigmaGroupNorm",
    "SigmaLayerNorm",
    "SigmaLayerNorm2d",
    "SigmaNormConfig",
    "SigmaNormEnsemble",
    "SigmaRMSNorm",
    "SigmaSyncBatchNorm",
    "convert_norm_layers",
    "ensemble_prediction",
    "find_norm_layers",
    "geometric_ambiguity",
    "jensen_gap",
    "member_ownership",
    "mutual_information",
    "ownership_counts",
    "pairwise_cosine",
    "parameter_counts",
    "predict",
    "select_layers",
    "sharing_penalty",
    "signorm_cosine",
    "signorm_ensemble",
]
