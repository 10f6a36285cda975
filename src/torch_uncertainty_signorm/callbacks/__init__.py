"""The method's Lightning callbacks: member ownership figures, τ held at a target diversity, the
identical-members warning and the logits tap the routine reads.

Each callback (listed in ``__init__.pyi``) is imported on first use (PEP 562); the run
callbacks that were here (exact resume, run record, ...) moved to ``signorm_lab.callbacks``.
"""

import lazy_loader

from .. import MOVED_NAMES, MOVED_REMOVED_IN
from ..utils.moved_modules import moved_names, names_moved_from

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
__getattr__ = moved_names(
    __name__, names_moved_from(__name__, MOVED_NAMES), MOVED_REMOVED_IN, __getattr__
)
