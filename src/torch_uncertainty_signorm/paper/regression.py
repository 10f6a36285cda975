"""Deprecated name of :mod:`torch_uncertainty_signorm.reproduction.regression` (the same module)."""

import sys

from torch_uncertainty_signorm.reproduction import regression as _module

if __name__ == "__main__":
    sys.exit(_module.main())
else:
    sys.modules[__name__] = _module
