"""Lightning callbacks of the lab's runs: exact resume, the run record a comparison reads,
the ``results.csv`` columns beside TorchUncertainty's, parameter counts, test predictions on
disk, and near/far OOD and severity metrics.

Each callback (listed in ``__init__.pyi``) is imported on first use (PEP 562).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
