"""Deprecated name of :mod:`torch_uncertainty_signorm.reproduction.tables` (the same module)."""

import sys

from torch_uncertainty_signorm.reproduction import tables as _module

sys.modules[__name__] = _module
