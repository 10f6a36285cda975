"""Deprecated name of :mod:`torch_uncertainty_signorm.reproduction.runs` (the same module)."""

import sys

from torch_uncertainty_signorm.reproduction import runs as _module

sys.modules[__name__] = _module
