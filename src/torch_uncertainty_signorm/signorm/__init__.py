"""σNorm-Ensembles (σN-Ens), one module per part of the method, as peft's ``tuners/<method>/``.

:mod:`.layers` (the σNorm layers) and :mod:`.registry` (which norm becomes which σNorm layer),
:mod:`.conversion` (the walk that swaps them in), :mod:`.config` (the settings),
:mod:`.regularization` (the importance-sharing penalty) and :mod:`.regularization_guard`,
:mod:`.layer_selection` (the layers it acts on), :mod:`.diversity_target` (τ held at a target
σNorm-cos), :mod:`.optim` (the scale logits' parameter group) and :mod:`.ensemble` (the
wrapper, on :class:`~torch_uncertainty_signorm.members.MemberWrapper`).
"""

from .config import SigmaNormConfig
from .conversion import convert_norm_layers, find_norm_layers
from .ensemble import SigmaNormEnsemble, signorm_ensemble
from .layer_selection import REGULARIZED_LAYER_PRESETS, select_layers
from .layers import (
    SigmaBatchNorm1d,
    SigmaBatchNorm2d,
    SigmaBatchNorm3d,
    SigmaGroupNorm,
    SigmaLayerNorm,
    SigmaLayerNorm2d,
    SigmaNorm,
    SigmaRMSNorm,
    SigmaSyncBatchNorm,
)
from .regularization import ImportanceSharingPenalty, sharing_penalty

__all__ = [
    "REGULARIZED_LAYER_PRESETS",
    "ImportanceSharingPenalty",
    "SigmaBatchNorm1d",
    "SigmaBatchNorm2d",
    "SigmaBatchNorm3d",
    "SigmaGroupNorm",
    "SigmaLayerNorm",
    "SigmaLayerNorm2d",
    "SigmaNorm",
    "SigmaNormConfig",
    "SigmaNormEnsemble",
    "SigmaRMSNorm",
    "SigmaSyncBatchNorm",
    "convert_norm_layers",
    "find_norm_layers",
    "select_layers",
    "sharing_penalty",
    "signorm_ensemble",
]
