"""Deprecated name of :mod:`torch_uncertainty_signorm.reproduction.results_table` (same module)."""

import sys

from torch_uncertainty_signorm.reproduction import results_table as _module

if __name__ == "__main__":
    sys.exit(_module.command())
else:
    sys.modules[__name__] = _module
