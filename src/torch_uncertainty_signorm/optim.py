"""Deprecated in 0.1.0, removed in 0.2.0: the σN-Ens optimizer recipe moved to
:mod:`torch_uncertainty_signorm.signorm.optim` (``from torch_uncertainty_signorm.signorm.optim
import signorm_optim_recipe``).

Importing this module warns (``FutureWarning``) and gives the names it held, from their new
module: the same objects.
"""

import warnings

from .signorm.optim import (
    ADAPTIVE_SCALE_LR_MULTIPLIER,
    DEFAULT_SCALE_LR_MULTIPLIER,
    is_adaptive,
    scale_rate,
    signorm_optim_recipe,
    signorm_param_groups,
)

__all__ = [
    "ADAPTIVE_SCALE_LR_MULTIPLIER",
    "DEFAULT_SCALE_LR_MULTIPLIER",
    "is_adaptive",
    "scale_rate",
    "signorm_optim_recipe",
    "signorm_param_groups",
]

warnings.warn(
    "torch_uncertainty_signorm.optim is deprecated and will be removed in "
    "torch-uncertainty-signorm 0.2.0: import from torch_uncertainty_signorm.signorm.optim "
    "instead (from torch_uncertainty_signorm.signorm.optim import signorm_optim_recipe).",
    FutureWarning,
    stacklevel=2,
)
