"""The former name of :mod:`torch_uncertainty_signorm.signorm.regularization_guard`, kept for one release."""

import warnings

from .signorm.regularization_guard import *  # noqa: F403
from .signorm.regularization_guard import __all__  # noqa: F401

warnings.warn(
    "torch_uncertainty_signorm.regulariser_check is now "
    "torch_uncertainty_signorm.signorm.regularization_guard; the old name goes in the next release.",
    DeprecationWarning, stacklevel=2,
)
