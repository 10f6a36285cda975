"""Deprecated name of :mod:`torch_uncertainty_signorm.reproduction.published` (the same module)."""

import sys

from torch_uncertainty_signorm.reproduction import published as _module

sys.modules[__name__] = _module
