"""Evaluation beyond the method: near/far OOD groups and severity sweeps, the printed test
results and the results file, parameter counts.

The names listed in ``__init__.pyi`` are imported on first use, so that the light
:mod:`.eval_sets` (read by the paper tooling) does not import torchmetrics and Lightning.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
