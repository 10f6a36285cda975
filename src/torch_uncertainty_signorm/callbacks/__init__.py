"""The method's Lightning callbacks: member ownership figures, τ held at a target diversity, the
identical-members warning and the logits tap the routine reads.

Each callback (listed in ``__init__.pyi``) is imported on first use (PEP 562); the run
callbacks that were here (exact resume, run record, ...) moved to ``signorm_lab.callbacks``.
"""

import lazy_loader

from .. import MOVED_REMOVED_IN, _moved_names_of
from ..utils.moved_modules import moved_names

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
__getattr__ = moved_names(__name__, _moved_names_of(__name__), MOVED_REMOVED_IN, __getattr__)
