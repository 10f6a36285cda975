# The public names: read by type checkers, and by ``lazy_loader.attach_stub`` in __init__.py,
# which imports each name's module on first use.
from .evaluation.diversity import geometric_ambiguity as geometric_ambiguity
from .evaluation.diversity import jensen_gap as jensen_gap
from .evaluation.diversity import member_ownership as member_ownership
from .evaluation.diversity import mutual_information as mutual_information
from .evaluation.diversity import ownership_counts as ownership_counts
from .evaluation.diversity import pairwise_cosine as pairwise_cosine
from .evaluation.diversity import signorm_cosine as signorm_cosine
from .evaluation.prediction import EnsemblePrediction as EnsemblePrediction
from .evaluation.prediction import ensemble_prediction as ensemble_prediction
from .evaluation.prediction import predict as predict
from .members.heads import MemberHeads as MemberHeads
from .members.wrapper import MemberWrapper as MemberWrapper
from .signorm.config import SigmaNormConfig as SigmaNormConfig
from .signorm.conversion import convert_norm_layers as convert_norm_layers
from .signorm.conversion import find_norm_layers as find_norm_layers
from .signorm.ensemble import SigmaNormEnsemble as SigmaNormEnsemble
from .signorm.ensemble import signorm_ensemble as signorm_ensemble
from .signorm.layer_selection import REGULARIZED_LAYER_PRESETS as REGULARIZED_LAYER_PRESETS
from .signorm.layer_selection import select_layers as select_layers
from .signorm.layers import SigmaBatchNorm1d as SigmaBatchNorm1d
from .signorm.layers import SigmaBatchNorm2d as SigmaBatchNorm2d
from .signorm.layers import SigmaBatchNorm3d as SigmaBatchNorm3d
from .signorm.layers import SigmaGroupNorm as SigmaGroupNorm
from .signorm.layers import SigmaLayerNorm as SigmaLayerNorm
from .signorm.layers import SigmaLayerNorm2d as SigmaLayerNorm2d
from .signorm.layers import SigmaRMSNorm as SigmaRMSNorm
from .signorm.layers import SigmaSyncBatchNorm as SigmaSyncBatchNorm
from .signorm.normalization_layer import (
    signorm_normalization_layer as signorm_normalization_layer,
)
from .signorm.regularization import ImportanceSharingPenalty as ImportanceSharingPenalty
from .signorm.regularization import sharing_penalty as sharing_penalty

__version__: str
