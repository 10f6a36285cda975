"""σNorm-Ensembles for TorchUncertainty: implicit ensembles with temperature-controlled diversity."""

from .conversion import convert_norm_layers, find_norm_layers
from .diversity import (
    geometric_ambiguity,
    jensen_gap,
    member_ownership,
    mutual_information,
    ownership_counts,
    pairwise_cosine,
    signorm_cosine,
)
from .ensemble import SigmaNormEnsemble, signorm_ensemble
from .layer_selection import REGULARIZED_LAYER_PRESETS, select_layers
from .layers import (
    MemberHeads,
    SigmaBatchNorm1d,
    SigmaBatchNorm2d,
    SigmaBatchNorm3d,
    SigmaGroupNorm,
    SigmaLayerNorm,
    SigmaLayerNorm2d,
    SigmaRMSNorm,
    SigmaSyncBatchNorm,
)
from .member_wrapper import MemberWrapper
from .parameter_counts import parameter_counts
from .prediction import EnsemblePrediction, ensemble_prediction, predict
from .regularization import ImportanceSharingPenalty, sharing_penalty

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
